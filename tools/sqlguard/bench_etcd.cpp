// sqlguard bench --etcd HOST:PORT: etcd's own lock service, as `etcdctl lock`
// uses it — a lease per client, Lock (a key under the lock's prefix, then a
// server-side wait for the keys before it to go: a watch, no polling) and
// Unlock (delete the key) — through the v3 JSON gateway (etcd_client.h).
// Part of the comparators module (bench_comparators.h).
#include <iostream>

#include "bench_comparators.h"
#include "etcd_client.h"
#include "sqlguard/errors.h"

namespace sqlguard::bench {

namespace {
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A client's lease: as sqlguard's, 30 s; replaced (between cycles) before a
// third of it has passed, so a long cell never runs into its expiry.
constexpr std::chrono::seconds kLeaseTtl{kTtlMs / 1000};

class EtcdContender final : public Contender {
 public:
  EtcdContender(const std::string& endpoint, std::string name) : etcd_(endpoint), name_(std::move(name)) { new_lease(); }
  ~EtcdContender() override {
    try {
      etcd_.revoke_lease(lease_);
    } catch (const std::exception& e) {
      std::cerr << "bench: revoking an etcd lease failed (it expires by itself): " << e.what() << "\n";
    }
  }
  bool acquire(milliseconds timeout) override {
    if (Clock::now() - granted_ > kLeaseTtl / 3) replace_lease();
    auto key = etcd_.lock(name_, lease_, timeout);
    if (!key) {
      // The abandoned request may still be granted the lock: its lease goes.
      replace_lease();
      return false;
    }
    key_ = *std::move(key);
    return true;
  }
  void release() override { etcd_.unlock(key_); }
  void ping() override { etcd_.ping(); }

 private:
  void new_lease() {
    lease_ = etcd_.grant_lease(kLeaseTtl);
    granted_ = Clock::now();
  }
  void replace_lease() {
    etcd_.revoke_lease(lease_);
    new_lease();
  }
  EtcdClient etcd_;
  std::string name_, key_;
  std::int64_t lease_ = 0;
  Clock::time_point granted_;
};
}  // namespace

Comparator module_etcd_comparator(const std::string& host_port) {
  const std::string version = EtcdClient(host_port).server_version();
  Comparator out;
  out.name = "etcd";
  out.durability = {"etcd " + version + ", one node: 2 raft-log fsyncs per cycle (the lock's put, the unlock's delete)",
                    2};
  out.round_trips = 2;
  out.make = [host_port](const std::string& name, int) -> std::unique_ptr<Contender> {
    return std::make_unique<EtcdContender>(host_port, "sqlguard-bench/" + name);
  };
  return out;
}

}  // namespace sqlguard::bench

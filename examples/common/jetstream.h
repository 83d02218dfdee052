// A thin RAII wrapper of the NATS C client's JetStream calls the examples use.
#pragma once

#include <nats/nats.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace example {

class JetStream {
 public:
  explicit JetStream(const std::string& url) {
    check(natsConnection_ConnectTo(&nc_, url.c_str()), "connecting to NATS at " + url);
    jsOptions_Init(&jo_);
    check(natsConnection_JetStream(&js_, nc_, &jo_), "opening a JetStream context");
  }
  ~JetStream() {
    if (js_) jsCtx_Destroy(js_);
    if (nc_) natsConnection_Destroy(nc_);
  }
  JetStream(const JetStream&) = delete;
  JetStream& operator=(const JetStream&) = delete;

  // Creates the stream when it does not exist (any instance may call it).
  void ensure_stream(const std::string& name, const std::string& subjects) {
    jsStreamInfo* si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    if (js_GetStreamInfo(&si, js_, name.c_str(), nullptr, &jerr) == NATS_OK) {
      jsStreamInfo_Destroy(si);
      return;
    }
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = name.c_str();
    const char* subj[1] = {subjects.c_str()};
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = static_cast<int64_t>(120) * 1000 * 1000 * 1000;  // 2 min de-duplication window (ns)
    natsStatus s = js_AddStream(&si, js_, &cfg, nullptr, &jerr);
    if (s == NATS_OK) {
      jsStreamInfo_Destroy(si);
      return;
    }
    if (jerr == JSStreamNameExistErr) return;  // another instance created it meanwhile
    check(s, "creating stream " + name);
  }

  using Headers = std::vector<std::pair<std::string, std::string>>;

  // Publishes and waits for JetStream's ack; `msg_id` is the de-duplication
  // id (Nats-Msg-Id; "" = none): a re-publish inside the window is dropped
  // by the server. `headers` travel with the message (e.g. why it was dead-lettered).
  // Returns true if the server reported it as a duplicate.
  bool publish(const std::string& subject, const std::string& data, const std::string& msg_id,
               const Headers& headers = {}) {
    natsMsg* msg = nullptr;
    check(natsMsg_Create(&msg, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size())),
          "creating message " + msg_id);
    std::unique_ptr<natsMsg, void (*)(natsMsg*)> owned(msg, natsMsg_Destroy);
    for (const auto& [name, value] : headers)
      check(natsMsgHeader_Set(msg, name.c_str(), value.c_str()), "setting header " + name + " of " + msg_id);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    if (!msg_id.empty()) po.MsgId = msg_id.c_str();
    po.MaxWait = 5000;
    jsPubAck* pa = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    check(js_PublishMsg(&pa, js_, msg, &po, &jerr), "publishing " + msg_id);
    bool dup = pa && pa->Duplicate;
    jsPubAck_Destroy(pa);
    return dup;
  }

  natsConnection* connection() const { return nc_; }
  jsCtx* context() const { return js_; }

  static void check(natsStatus s, const std::string& what) {
    if (s != NATS_OK) throw std::runtime_error(what + ": " + natsStatus_GetText(s) + " (" + nats_GetLastError(nullptr) + ")");
  }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  jsOptions jo_;
};

}  // namespace example

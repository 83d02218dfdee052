// sqlguard-faultproxy: the fault proxy (fault_proxy.h) as a process, for
// experiments by hand and for scripts.
//
//   sqlguard-faultproxy --target 127.0.0.1:55432 [--listen 127.0.0.1:0] [--lifetime 600]
//
// Prints "listening 127.0.0.1:PORT" on stdout, then reads one command per
// line on stdin: pass | freeze | drop | delay MS | stats | quit, answering
// each with one line ("ok MODE", "stats ...", "error ..."). It stops at EOF
// on stdin (its controller is gone), at quit, or after --lifetime seconds.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include "fault_proxy.h"

using namespace sqlguard::faultproxy;

namespace {

int usage(const char* why) {
  std::cerr << "sqlguard-faultproxy: " << why
            << "\nusage: sqlguard-faultproxy --target HOST:PORT [--listen HOST:PORT] [--lifetime SECONDS]\n";
  return 2;
}

std::string handle_command(FaultProxy& p, const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "pass") p.pass();
  else if (cmd == "freeze") p.freeze();
  else if (cmd == "drop") p.drop();
  else if (cmd == "delay") {
    long long ms = -1;
    if (!(in >> ms) || ms < 0 || ms > 3600000) return "error delay needs MS (0..3600000)";
    p.delay(std::chrono::milliseconds(ms));
  } else if (cmd == "stats") {
    auto s = p.stats();
    return "stats mode=" + std::string(to_string(p.mode())) + " accepted=" + std::to_string(s.accepted) +
           " open=" + std::to_string(s.open) + " dropped=" + std::to_string(s.dropped) +
           " bytes_to_target=" + std::to_string(s.bytes_to_target) +
           " bytes_to_client=" + std::to_string(s.bytes_to_client);
  } else {
    return "error unknown command '" + cmd + "' (pass, freeze, drop, delay MS, stats, quit)";
  }
  return "ok " + std::string(to_string(p.mode()));
}

}  // namespace

int main(int argc, char** argv) {
  ProxyOptions o;
  o.lifetime = std::chrono::minutes(10);
  bool have_target = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
      std::string v = argv[++i];
      if (a == "--target") {
        std::tie(o.target_host, o.target_port) = parse_host_port(v);
        have_target = true;
      } else if (a == "--listen") {
        std::tie(o.listen_host, o.listen_port) = parse_host_port(v);
      } else if (a == "--lifetime") {
        o.lifetime = std::chrono::seconds(std::stoll(v));
      } else {
        return usage(("unknown option " + a).c_str());
      }
    }
    if (!have_target) return usage("--target is required");
    FaultProxy proxy(o);
    std::cout << "listening " << o.listen_host << ":" << proxy.port() << std::endl;
    std::string line;
    for (;;) {
      pollfd fd{STDIN_FILENO, POLLIN, 0};
      ::poll(&fd, 1, 500);
      if (!proxy.running()) break;  // the lifetime ended
      if (!(fd.revents & (POLLIN | POLLHUP))) continue;
      if (!std::getline(std::cin, line) || line == "quit") break;
      if (line.empty()) continue;
      std::cout << handle_command(proxy, line) << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "sqlguard-faultproxy: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

#include "store_host.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <mutex>
#include <optional>

#include "ddx/processes/env.h"
#include "ddx/watchdog/job_events.h"
#include "ddx/watchdog/store_lost.h"

namespace ddx::detail {
namespace {

// What c10d's client says when the socket itself failed, in a few words; nullopt for a timeout
// or anything that is not about the connection. An end of stream, a reset and a broken pipe are
// one cause to the user (which one a rank sees depends on what it was doing at that moment), so
// every rank that lost the store fails the same way.
std::optional<std::string> lost_connection_cause(const c10::DistNetworkError& e) {
  std::string text = e.msg();
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text.find("timeout") != std::string::npos || text.find("timed out") != std::string::npos) return std::nullopt;
  for (const char* closed : {"got 0 bytes", "connection reset", "broken pipe"}) {
    if (text.find(closed) != std::string::npos) return "the store closed the connection";
  }
  if (text.find("connection refused") != std::string::npos) return "connection refused";
  return std::nullopt;
}

std::mutex g_quiet_mutex;
int g_quiet_depth = 0;
int g_quiet_saved_level = 0;

}  // namespace

QuietStoreLogs::QuietStoreLogs() {
  std::lock_guard<std::mutex> lock(g_quiet_mutex);
  if (g_quiet_depth++ == 0) {
    g_quiet_saved_level = FLAGS_caffe2_log_level;
    FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 2);  // c10's ERROR
  }
}

QuietStoreLogs::~QuietStoreLogs() {
  std::lock_guard<std::mutex> lock(g_quiet_mutex);
  if (--g_quiet_depth == 0) FLAGS_caffe2_log_level = g_quiet_saved_level;
}

bool agent_hosts_store(const RendezvousInfo& info) {
  return info.source == RendezvousSource::Torchrun &&
         env_get(current_env(), "TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True");
}

StoreIdentity store_identity(const RendezvousInfo& info) {
  const bool agent = agent_hosts_store(info);
  return {"the rendezvous store at " + info.master_addr + ":" + std::to_string(info.master_port) + " (hosted by " +
              (agent ? std::string("the torchrun agent") : std::string("rank 0")) + ")",
          agent ? -1 : 0};
}

void rethrow_store_failure(const StoreIdentity& store) {
  try {
    throw;
  } catch (const c10::DistNetworkError& e) {
    if (auto cause = lost_connection_cause(e)) {
      static std::once_flag recorded;
      std::call_once(recorded, [&] {
        events::Event("store.unreachable")
            .text("store", store.description)
            .text("cause", *cause)
            .number("host_rank", store.host_rank)
            .emit();
      });
      throw StoreLost(store.description, *cause);
    }
    throw;
  }
}

}  // namespace ddx::detail

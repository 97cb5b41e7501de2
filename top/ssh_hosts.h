#pragma once
// `ddx top --hosts FILE`: hosts without a ddx job polled over ssh as the guide's top-cluster
// does, but with ssh's stderr kept apart from nvidia-smi's stdout, a time limit per host, and
// the output parsed strictly (smi_parse.h). No LibTorch.
#include <chrono>
#include <string>
#include <vector>

#include "top/top_model.h"

namespace ddx::top {

// One host per line; blank lines and '#' comments skipped. Throws UsageError naming the file
// and line for a line that is not a host name (user@host and host:port are not accepted: put
// those in ~/.ssh/config).
std::vector<std::string> read_hosts_file(const std::string& path);

// Polls every host in parallel: `ssh_command` (split on spaces, e.g. "ssh -o BatchMode=yes")
// followed by the host and kSmiQuery. A host that fails, times out or prints malformed lines
// gets them in `problems`; nothing it printed on stderr is parsed.
std::vector<NodeView> poll_hosts(const std::vector<std::string>& hosts, const std::string& ssh_command,
                                 std::chrono::milliseconds timeout);

}  // namespace ddx::top

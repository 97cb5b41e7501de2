#pragma once
// Which network interface a rank talks to its peers on (Gloo's device), decided the same way by
// World::init and by `ddx doctor`, which reports it.
//
// Gloo by default resolves the hostname and listens on that address. On a new cluster the
// hostname often resolves to nothing or to loopback (containers, fresh machines without DNS
// entries); Gloo then falls back to 127.0.0.1 and the job dies with "connectFullMesh failed ...
// Connection refused, remote=[127.0.0.1]". The rule here:
//   1. GLOO_SOCKET_IFNAME set: that interface, if this host has it; else an error.
//   2. MASTER_ADDR reached through loopback (a one-host job): loopback.
//   3. the hostname resolves to an address of this host other than loopback: the hostname.
//   4. otherwise the interface the kernel routes MASTER_ADDR through.
//   5. otherwise (no route to MASTER_ADDR) an error naming the cause and the fix.
// No LibTorch here; the facts are plain data so that tests can inject any host.
#include <string>
#include <utility>
#include <vector>

namespace ddx {

// What this host looks like from the network's point of view.
struct InterfaceFacts {
  std::string gloo_socket_ifname;                                  // "" when unset
  std::string master_addr;
  std::string hostname;
  std::vector<std::string> hostname_addresses;                     // what the hostname resolves to
  std::vector<std::pair<std::string, std::string>> interfaces;     // (name, address) of this host
  std::string route_interface;                                     // the one that routes to master_addr
};

struct InterfaceChoice {
  enum class Kind { Named, Loopback, Hostname, Route, Error };
  Kind kind = Kind::Error;
  std::string interface;  // Named, Route, Loopback: the interface; Hostname: the one owning `address`
  std::string address;    // the local address peers connect to
  std::string reason;     // one line: what was chosen and why
  std::string error;      // Kind::Error: one line with the cause and the fix
};

// Measures this host: its interfaces and addresses, what `hostname` resolves to, the route.
InterfaceFacts probe_interface_facts(const std::string& gloo_socket_ifname, const std::string& master_addr,
                                     const std::string& hostname);

// The rule above, on given facts.
InterfaceChoice choose_interface(const InterfaceFacts& facts);

// The choice for this process's Gloo devices, made once (the first call's master_addr) from
// GLOO_SOCKET_IFNAME, the hostname and this host's interfaces, and logged once: at info level
// when the route to MASTER_ADDR was picked (what a user should see first on a new cluster),
// else at debug level. Throws UsageError with the one-line error when there is no usable choice.
const InterfaceChoice& gloo_interface_choice(const std::string& master_addr);

// The interface the kernel would use to reach `address` ("" when it cannot be reached or
// resolved): connects a UDP socket, which sends nothing, and finds who owns its local address.
std::string route_interface(const std::string& address);

// Addresses `host` resolves to (empty when it does not), and the resolver's error text.
std::vector<std::string> resolve_host(const std::string& host, std::string* error = nullptr);

// This host's interfaces with their IPv4/IPv6 addresses (one entry per address).
std::vector<std::pair<std::string, std::string>> interface_addresses();

}  // namespace ddx

#include "ddx/rendezvous/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "ddx/errors/errors.h"
#include "ddx/text/log.h"
#include "ddx/text/text.h"

namespace ddx {
namespace {

std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

bool is_loopback_address(const std::string& a) { return a.rfind("127.", 0) == 0 || a == "::1"; }

bool is_loopback_name(const std::string& a) { return a == "localhost" || is_loopback_address(a); }

// The interface owning `address`, or "".
std::string owner_of(const InterfaceFacts& f, const std::string& address) {
  for (const auto& [name, addr] : f.interfaces) {
    if (addr == address) return name;
  }
  return "";
}

// The first IPv4 address of `interface` (Gloo prefers it), else its first address.
std::string address_of(const InterfaceFacts& f, const std::string& interface) {
  std::string any;
  for (const auto& [name, addr] : f.interfaces) {
    if (name != interface) continue;
    if (addr.find(':') == std::string::npos) return addr;
    if (any.empty()) any = addr;
  }
  return any;
}

std::string interface_list(const InterfaceFacts& f) {
  std::set<std::string> names;
  for (const auto& entry : f.interfaces) names.insert(entry.first);
  return join(std::vector<std::string>(names.begin(), names.end()));
}

}  // namespace

std::vector<std::string> resolve_host(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    if (error) *error = ::gai_strerror(rc);
    return {};
  }
  std::set<std::string> addresses;
  for (addrinfo* a = found; a; a = a->ai_next) addresses.insert(address_text(a->ai_addr));
  ::freeaddrinfo(found);
  return {addresses.begin(), addresses.end()};
}

std::vector<std::pair<std::string, std::string>> interface_addresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    out.emplace_back(i->ifa_name, address_text(i->ifa_addr));
  }
  ::freeifaddrs(ifs);
  return out;
}

std::string route_interface(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (address.empty() || ::getaddrinfo(address.c_str(), "9", &hints, &found) != 0) return "";
  std::string local;
  int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage self{};
    socklen_t len = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      local = address_text(reinterpret_cast<sockaddr*>(&self));
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  if (local.empty()) return "";
  for (const auto& [name, addr] : interface_addresses()) {
    if (addr == local) return name;
  }
  return "";
}

InterfaceFacts probe_interface_facts(const std::string& gloo_socket_ifname, const std::string& master_addr,
                                     const std::string& hostname) {
  InterfaceFacts f;
  f.gloo_socket_ifname = gloo_socket_ifname;
  f.master_addr = master_addr;
  f.hostname = hostname;
  f.interfaces = interface_addresses();
  f.route_interface = route_interface(master_addr);
  // Only needed when neither GLOO_SOCKET_IFNAME nor loopback decides (resolving a hostname may
  // wait on an unreachable DNS server).
  const bool via_loopback = !f.route_interface.empty() && is_loopback_address(address_of(f, f.route_interface));
  if (gloo_socket_ifname.empty() && !is_loopback_name(master_addr) && !via_loopback) {
    f.hostname_addresses = resolve_host(hostname);
  }
  return f;
}

InterfaceChoice choose_interface(const InterfaceFacts& f) {
  using Kind = InterfaceChoice::Kind;
  InterfaceChoice c;
  const std::string route_fix =
      f.route_interface.empty()
          ? "export GLOO_SOCKET_IFNAME=<the interface other hosts reach> (this host has " + interface_list(f) + ")"
          : "export GLOO_SOCKET_IFNAME=" + f.route_interface + " (the interface that routes to MASTER_ADDR " +
                f.master_addr + ")";
  if (!f.gloo_socket_ifname.empty()) {
    c.interface = f.gloo_socket_ifname;
    c.address = address_of(f, f.gloo_socket_ifname);
    if (c.address.empty()) {
      c.error = "GLOO_SOCKET_IFNAME=" + f.gloo_socket_ifname + " names no interface with an address on " +
                f.hostname + " (it has " + interface_list(f) + "); fix: " + route_fix;
      return c;
    }
    c.kind = Kind::Named;
    c.reason = "interface " + c.interface + " (" + c.address + "), from GLOO_SOCKET_IFNAME";
    return c;
  }
  // MASTER_ADDR reached through loopback ("localhost", or a name such as mpiexec's hostname
  // that resolves to 127.0.1.1): every rank is on this host.
  if (is_loopback_name(f.master_addr) ||
      (!f.route_interface.empty() && is_loopback_address(address_of(f, f.route_interface)))) {
    c.kind = Kind::Loopback;
    c.interface = owner_of(f, "127.0.0.1");
    c.address = "127.0.0.1";
    c.reason = "loopback (MASTER_ADDR " + f.master_addr + " is this host)";
    return c;
  }
  for (const auto& a : f.hostname_addresses) {
    if (!is_loopback_address(a) && !owner_of(f, a).empty()) {
      c.kind = Kind::Hostname;
      c.interface = owner_of(f, a);
      c.address = a;
      c.reason = "interface " + c.interface + " (" + a + "), the address hostname " + f.hostname + " resolves to";
      return c;
    }
  }
  const std::string hostname_gives =
      "hostname " + f.hostname +
      (f.hostname_addresses.empty() ? " does not resolve"
                                    : " resolves to " + join(f.hostname_addresses) + ", no address of this host but loopback");
  if (!f.route_interface.empty() && !address_of(f, f.route_interface).empty()) {
    c.kind = Kind::Route;
    c.interface = f.route_interface;
    c.address = address_of(f, f.route_interface);
    c.reason = "interface " + c.interface + " (" + c.address + "), the route to MASTER_ADDR " + f.master_addr +
               " (" + hostname_gives + "; set GLOO_SOCKET_IFNAME to choose)";
    return c;
  }
  c.error = hostname_gives + " and no interface routes to MASTER_ADDR " + f.master_addr +
            ", so Gloo has no address other hosts can reach; fix: " + route_fix +
            ", or give the hostname its address in DNS or /etc/hosts";
  return c;
}

const InterfaceChoice& gloo_interface_choice(const std::string& master_addr) {
  static std::once_flag once;
  static InterfaceChoice choice;
  std::call_once(once, [&] {
    const char* named = std::getenv("GLOO_SOCKET_IFNAME");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    choice = choose_interface(probe_interface_facts(named ? named : "", master_addr, host));
    if (choice.kind == InterfaceChoice::Kind::Route) {
      log::info("gloo: ", choice.reason);
    } else if (choice.kind != InterfaceChoice::Kind::Error) {
      log::debug("gloo: ", choice.reason);
    }
  });
  if (choice.kind == InterfaceChoice::Kind::Error) throw UsageError(choice.error);
  return choice;
}

}  // namespace ddx

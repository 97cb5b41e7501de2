// The interface rule of net_interface.h on injected hosts (what World::init gives Gloo and what
// `ddx doctor` reports), and the measured facts of this machine.
#include <gtest/gtest.h>

#include <string>

#include "ddx/rendezvous/net_interface.h"

namespace ddx {
namespace {

using Kind = InterfaceChoice::Kind;

// Host b of a two-host job: its hostname does not resolve, veth1 routes to the master.
InterfaceFacts host_b() {
  InterfaceFacts f;
  f.master_addr = "10.0.0.1";
  f.hostname = "b";
  f.interfaces = {{"lo", "127.0.0.1"}, {"lo", "::1"}, {"veth1", "fe80::1"}, {"veth1", "10.0.0.2"}};
  f.route_interface = "veth1";
  return f;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(NetInterface, UnresolvableHostnamePicksTheRouteToTheMasterAndSaysWhy) {
  const InterfaceChoice c = choose_interface(host_b());
  EXPECT_EQ(c.kind, Kind::Route);
  EXPECT_EQ(c.interface, "veth1");
  EXPECT_EQ(c.address, "10.0.0.2");  // IPv4 first, as Gloo prefers
  EXPECT_EQ(c.reason,
            "interface veth1 (10.0.0.2), the route to MASTER_ADDR 10.0.0.1 (hostname b does not resolve; set "
            "GLOO_SOCKET_IFNAME to choose)");
}

TEST(NetInterface, HostnameOnLoopbackOnlyAlsoPicksTheRoute) {
  InterfaceFacts f = host_b();
  f.hostname_addresses = {"127.0.1.1"};
  const InterfaceChoice c = choose_interface(f);
  EXPECT_EQ(c.kind, Kind::Route);
  EXPECT_TRUE(has(c.reason, "hostname b resolves to 127.0.1.1, no address of this host but loopback")) << c.reason;
}

TEST(NetInterface, HostnameWithAnAddressOfThisHostIsKept) {
  InterfaceFacts f = host_b();
  f.hostname_addresses = {"10.0.0.2"};
  const InterfaceChoice c = choose_interface(f);
  EXPECT_EQ(c.kind, Kind::Hostname);
  EXPECT_EQ(c.interface, "veth1");
  // A stale DNS entry (an address this host does not have) is not used.
  f.hostname_addresses = {"10.5.5.5"};
  EXPECT_EQ(choose_interface(f).kind, Kind::Route);
}

TEST(NetInterface, GlooSocketIfnameWinsAndAMissingOneIsOneLineWithTheFix) {
  InterfaceFacts f = host_b();
  f.gloo_socket_ifname = "veth1";
  EXPECT_EQ(choose_interface(f).kind, Kind::Named);
  f.gloo_socket_ifname = "eth1";
  const InterfaceChoice c = choose_interface(f);
  EXPECT_EQ(c.kind, Kind::Error);
  EXPECT_EQ(c.error,
            "GLOO_SOCKET_IFNAME=eth1 names no interface with an address on b (it has lo, veth1); fix: export "
            "GLOO_SOCKET_IFNAME=veth1 (the interface that routes to MASTER_ADDR 10.0.0.1)");
  EXPECT_EQ(c.error.find('\n'), std::string::npos);
}

TEST(NetInterface, LoopbackMasterIsAOneHostJob) {
  InterfaceFacts f = host_b();
  f.master_addr = "127.0.0.1";
  f.route_interface = "lo";
  const InterfaceChoice c = choose_interface(f);
  EXPECT_EQ(c.kind, Kind::Loopback);
  EXPECT_EQ(c.address, "127.0.0.1");
  // mpiexec's MASTER_ADDR is the hostname, which may resolve to loopback: still one host.
  f.master_addr = "b";
  EXPECT_EQ(choose_interface(f).kind, Kind::Loopback);
}

TEST(NetInterface, NoRouteToTheMasterFailsNamingCauseAndFix) {
  InterfaceFacts f = host_b();
  f.route_interface = "";  // MASTER_ADDR unreachable from here
  const InterfaceChoice c = choose_interface(f);
  EXPECT_EQ(c.kind, Kind::Error);
  EXPECT_EQ(c.error,
            "hostname b does not resolve and no interface routes to MASTER_ADDR 10.0.0.1, so Gloo has no address "
            "other hosts can reach; fix: export GLOO_SOCKET_IFNAME=<the interface other hosts reach> (this host has "
            "lo, veth1), or give the hostname its address in DNS or /etc/hosts");
}

TEST(NetInterface, ThisMachineRoutesLoopbackThroughLo) {
  EXPECT_EQ(route_interface("127.0.0.1"), "lo");
  EXPECT_EQ(route_interface(""), "");
  EXPECT_FALSE(interface_addresses().empty());
  EXPECT_FALSE(resolve_host("localhost").empty());
}

}  // namespace
}  // namespace ddx

// Test nodes on one machine, for tests and benches that need a network between "hosts": N network
// namespaces joined by veth pairs through a bridge in a namespace of its own (the host's namespace
// is never touched), each node's link shaped with tc (tbf rate, netem delay). Needs root and
// iproute2; it does not fake a network where namespaces are refused (probe netnsSupport() first).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ds::test {

// How each node's link is shaped; zero leaves that part unshaped.
struct NetnsShape {
  // tbf in both directions of every node's link, like a full-duplex NIC of this speed: two
  // senders to one node share its rate.
  std::uint64_t rateBitsPerSecond = 0;
  std::chrono::microseconds delay{0};  // netem on each node's egress: a round trip pays it twice
};

// What this machine permits, probed once per process by making and removing a node. Each field is
// empty when that part works, else why not (for the skip message).
struct NetnsSupport {
  std::string namespaces;  // ip netns, veth, bridge
  std::string rate;        // tc tbf (also set when namespaces are refused)
  std::string delay;       // tc netem (the kernel may lack sch_netem)
};
const NetnsSupport& netnsSupport();

// The nodes. Names are dsnet-<pid>-<seq>-n<i> (and -br for the bridge's namespace), so parallel
// tests never collide and leftovers of a dead process are recognised (and removed by the next
// NetnsNodes). Node i has address 10.A.B.(i+1)/24 on its eth0, A.B from pid and seq.
// Removal: the destructor, and a reaper process that removes everything (killing any process still
// inside a node) as soon as the maker dies, SIGKILL included.
class NetnsNodes {
 public:
  // Throws std::runtime_error naming the command that failed and its output; asking for shaping
  // that netnsSupport() says is missing is an error too.
  explicit NetnsNodes(int count, const NetnsShape& shape = {});
  ~NetnsNodes();
  NetnsNodes(const NetnsNodes&) = delete;
  NetnsNodes& operator=(const NetnsNodes&) = delete;

  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int node) const { return names_.at(node); }
  const std::string& address(int node) const { return addresses_.at(node); }
  const NetnsShape& shape() const { return shape_; }

  // A ds-launch hostfile of the nodes' addresses ("ADDRESS slots=N" per node).
  std::string hostfile(int slotsPerNode) const;
  // DS_NETNS_MAP's value for `ds-launch --launcher netns`: "ADDRESS=NAMESPACE,...".
  std::string launcherMap() const;
  // `argv` run inside `node`: ip netns exec NAME argv... (environment kept).
  std::vector<std::string> inNode(int node, const std::vector<std::string>& argv) const;
  // Moves the calling thread (only) into `node`'s network: sockets it opens afterwards are there.
  // Never call it on a process's main thread: removal kills the processes found inside a node.
  void enterNode(int node) const;

  // Removes the namespaces now (what the destructor does); idempotent.
  void remove();

 private:
  void build();
  void startReaper();

  NetnsShape shape_;
  std::vector<std::string> names_;
  std::vector<std::string> addresses_;
  std::string bridge_;
  pid_t reaper_ = -1;
  int reaperPipe_ = -1;  // its write end: the reaper removes everything once this closes
};

// The namespaces NetnsNodes made in process `pid` that still exist (for tests of the cleanup).
std::vector<std::string> netnsNamesOf(pid_t pid);

}  // namespace ds::test

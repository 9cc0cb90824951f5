// Address lookups with getaddrinfo, and the routing trick (a UDP connect sends nothing).
#include "worker/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"

namespace ds::worker {

int freePortOn(const std::string& host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), "0", &hints, &found) != 0 || found == nullptr)
    throw Error("cannot resolve " + host + " to pick the program's MASTER_PORT");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  if (fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in bound{};
    socklen_t length = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    port = ntohs(bound.sin_port);
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (port == 0) throw Error("cannot find a free port on " + host + " for MASTER_PORT");
  return port;
}

std::string localBindAddress(const std::string& planHost, const std::string& coordinatorAddress) {
  if (planHost == "localhost") return "127.0.0.1";
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(planHost.c_str(), nullptr, &hints, &found) == 0) {
    freeaddrinfo(found);
    return planHost;
  }
  // A UDP "connect" sends nothing; it only picks the route and so the local address.
  const std::string host = coordinatorAddress.substr(0, coordinatorAddress.rfind(':'));
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(9);
  if (inet_pton(AF_INET, host.c_str(), &target.sin_addr) != 1)
    throw Error("host " + planHost + " does not resolve here and the coordinator address " + host +
                " is not an IPv4 address: add " + planHost + " to /etc/hosts");
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  const bool ok = fd >= 0 &&
                  connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  if (fd >= 0) close(fd);
  if (!ok) throw Error("host " + planHost + " does not resolve here and no route to " + host);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return text;
}

std::string machineName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace ds::worker

// The coordinator with mutual TLS: certificates generated for the test with openssl (a CA, a
// certificate for 127.0.0.1 signed by it, and one signed by a stranger CA). A worker with the
// job's certificate joins; plaintext, no certificate and a foreign certificate are refused.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "launcher/coordinator.h"
#include "runtime/common/error.h"
#include "test/tls_certificates.h"
#include "worker/coordinator_client.h"

using namespace ds::launcher;
using namespace ds::worker;
using ds::test::makeCertificates;
using ds::test::slurp;
using namespace std::chrono_literals;

namespace {

TlsFiles filesFor(const std::string& dir, const std::string& prefix) {
  return {slurp(dir + "/" + prefix + "-cert.pem"), slurp(dir + "/" + prefix + "-key.pem"),
          slurp(dir + "/" + prefix + "-ca.pem")};
}

}  // namespace

TEST_CASE("coordinator TLS: only peers with a certificate from the job's CA get in") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ds-tls-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  makeCertificates(dir, "job");
  makeCertificates(dir, "stranger");
  const TlsFiles job = filesFor(dir, "job");

  CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = "tls-token-0123456789abcdef";
  options.ranks = {{0, "127.0.0.1", 0, 0, 1}};
  options.tlsCertPem = job.certPem;
  options.tlsKeyPem = job.keyPem;
  options.tlsCaPem = job.caPem;
  Coordinator coordinator(options);

  CoordinatorClient plaintext(coordinator.address(), options.token);
  REQUIRE_THROWS_AS(plaintext.join({"127.0.0.1", 0}, 2s), ds::Error);

  CoordinatorClient noCertificate(coordinator.address(), options.token, {"", "", job.caPem});
  REQUIRE_THROWS_AS(noCertificate.join({"127.0.0.1", 0}, 2s), ds::Error);

  TlsFiles foreign = filesFor(dir, "stranger");
  foreign.caPem = job.caPem;  // trusts the coordinator, but its own certificate is a stranger's
  CoordinatorClient stranger(coordinator.address(), options.token, foreign);
  REQUIRE_THROWS_AS(stranger.join({"127.0.0.1", 0}, 2s), ds::Error);
  REQUIRE_FALSE(coordinator.snapshot()[0].joined);

  CoordinatorClient wrongToken(coordinator.address(), "not-the-token", job);
  REQUIRE_THROWS_WITH(wrongToken.join({"127.0.0.1", 0}, 5s), Catch::Contains("wrong job token"));

  CoordinatorClient member(coordinator.address(), options.token, job);
  REQUIRE(member.join({"127.0.0.1", 0}, 5s).rank == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("coordinator: a worker started by mpirun/srun joins by its global rank") {
  CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = "rank-token-0123456789abcdef";
  options.ranks = {{0, "127.0.0.1", 0, 0, 2, 0, 1}, {1, "127.0.0.1", 1, 1, 2, 0, 1}};
  options.jobArgs = {"prog.py"};
  Coordinator coordinator(options);
  CoordinatorClient client(coordinator.address(), options.token);
  JoinIdentity byRank;
  byRank.rank = 1;
  const JoinResult join = client.join(byRank, 5s);
  REQUIRE(join.rank == 1);
  REQUIRE(join.localRank == 1);
  REQUIRE(join.slot == 1);
  REQUIRE(join.host == "127.0.0.1");
  REQUIRE(join.nodeSlots == std::vector<int>{0, 1});
  CoordinatorClient extra(coordinator.address(), options.token);
  byRank.rank = 2;
  REQUIRE_THROWS_WITH(extra.join(byRank, 5s), Catch::Contains("rank 2 is not part of this job"));
}

// JobCertificate: mkdtemp (0700), then openssl: a CA (EC P-256, valid 7 days), a key and request
// for the job, and the job certificate signed by the CA with the extensions gRPC's TLS checks;
// the PEMs are read and the directory removed before the constructor returns.
#include "launcher/job_certificate.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/spawn.h"
#include "common/files.h"

namespace ds::launcher {
namespace {

// Runs openssl with `args`; its output is kept for the error message only.
void openssl(const std::vector<std::string>& args, const std::string& step) {
  if (!isExecutableOnPath("openssl"))
    throw Error("--tls-auto needs the openssl command (apt-get install openssl)");
  SpawnOptions options;
  options.argv = {"openssl"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.captureOutput = true;
  options.ownProcessGroup = false;
  const Spawned child = spawnProcess(options);
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(child.outputFd, buffer, sizeof(buffer));
    if (n > 0)
      output.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EAGAIN)
      break;
    else
      usleep(2000);
  }
  close(child.outputFd);
  if (const int status = waitForExit(child.pid); status != 0)
    throw Error("--tls-auto: openssl failed to " + step + " (status " + std::to_string(status) +
                "): " + output.substr(0, 400));
}

}  // namespace

JobCertificate::JobCertificate(const std::string& masterAddress) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") + "/ds-launch-tls-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw Error("--tls-auto: cannot create a private directory under " + pattern);
  const std::string dir = pattern;
  // Whatever happens, the directory goes (the window a SIGKILL could leave it in is the few
  // openssl runs at start-up).
  struct RemoveDirectory {
    const std::string& dir;
    ~RemoveDirectory() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove{dir};
  const std::string ca = dir + "/ca.pem", caKey = dir + "/ca-key.pem";
  const std::string cert = dir + "/job.pem", key = dir + "/job-key.pem";
  const std::vector<std::string> ecKey = {"-newkey", "ec", "-pkeyopt",
                                          "ec_paramgen_curve:prime256v1", "-nodes"};
  std::vector<std::string> args = {"req", "-x509"};
  args.insert(args.end(), ecKey.begin(), ecKey.end());
  args.insert(args.end(),
              {"-days", "7", "-subj", "/CN=ds-launch job CA", "-keyout", caKey, "-out", ca});
  openssl(args, "make the job's CA");
  args = {"req"};
  args.insert(args.end(), ecKey.begin(), ecKey.end());
  args.insert(args.end(),
              {"-subj", "/CN=" + masterAddress, "-keyout", key, "-out", dir + "/job.csr"});
  openssl(args, "make the job's key");
  unsigned char probe[16];
  const bool ip = inet_pton(AF_INET, masterAddress.c_str(), probe) == 1 ||
                  inet_pton(AF_INET6, masterAddress.c_str(), probe) == 1;
  std::ofstream(dir + "/job.ext")
      << "subjectAltName=" << (ip ? "IP:" : "DNS:") << masterAddress
      << "\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n";
  openssl({"x509", "-req", "-in", dir + "/job.csr", "-CA", ca, "-CAkey", caKey, "-CAcreateserial",
           "-days", "7", "-extfile", dir + "/job.ext", "-out", cert},
          "sign the job's certificate");
  pem_.certPem = readWholeFile(cert, "--tls-auto certificate");
  pem_.keyPem = readWholeFile(key, "--tls-auto key");
  pem_.caPem = readWholeFile(ca, "--tls-auto CA");
}

}  // namespace ds::launcher

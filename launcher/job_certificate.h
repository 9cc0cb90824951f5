// --tls-auto: a certificate made for one job. A fresh CA signs one certificate (serverAuth and
// clientAuth, the master address as subject alternative name) that the coordinator and every
// worker present, so mutual TLS needs no setup. Made with the openssl command line (Debian's
// openssl package) in a private directory that is removed as soon as the PEMs are in memory:
// workers get them through the environment, never as files, so no key is left on disk even when
// ds-launch is SIGKILLed.
#pragma once

#include <string>

#include "contract/rank_contract.h"

namespace ds::launcher {

class JobCertificate {
 public:
  // Throws ds::Error naming the openssl step that failed (or that openssl is missing).
  explicit JobCertificate(const std::string& masterAddress);

  const TlsFiles& pem() const { return pem_; }

 private:
  TlsFiles pem_;
};

}  // namespace ds::launcher

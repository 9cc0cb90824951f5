// --tls-auto: a certificate made for one job. A fresh CA signs one certificate (serverAuth and
// clientAuth, the master address as subject alternative name) that the coordinator and every
// worker present, so mutual TLS needs no setup; the private directory holding the files is
// removed when the object goes. Made with the openssl command line (Debian's openssl package).
#pragma once

#include <string>

#include "contract/rank_contract.h"

namespace ds::launcher {

class JobCertificate {
 public:
  // Throws ds::Error naming the openssl step that failed (or that openssl is missing).
  explicit JobCertificate(const std::string& masterAddress);
  ~JobCertificate();
  JobCertificate(const JobCertificate&) = delete;
  JobCertificate& operator=(const JobCertificate&) = delete;

  const std::string& certPath() const { return certPath_; }
  const std::string& keyPath() const { return keyPath_; }
  const std::string& caPath() const { return caPath_; }
  const TlsFiles& pem() const { return pem_; }

 private:
  std::string dir_, certPath_, keyPath_, caPath_;
  TlsFiles pem_;
};

}  // namespace ds::launcher

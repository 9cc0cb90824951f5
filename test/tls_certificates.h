// Test certificates made with the openssl command: a CA and a certificate for 127.0.0.1 it signed
// (usable by servers and clients), as DIR/PREFIX-ca.pem, PREFIX-cert.pem, PREFIX-key.pem.
#pragma once

#include <string>

namespace ds::test {

// Throws std::runtime_error when openssl fails.
void makeCertificates(const std::string& dir, const std::string& prefix);
std::string slurp(const std::string& path);

}  // namespace ds::test

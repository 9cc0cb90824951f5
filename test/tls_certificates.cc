// Certificates through the openssl command line (no extra test dependency).
#include "test/tls_certificates.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ds::test {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void makeCertificates(const std::string& dir, const std::string& prefix) {
  const std::string p = dir + "/" + prefix;
  const std::string script =
      "set -e; cd " + dir +
      "; "
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" +
      prefix +
      "-ca "
      "-keyout " +
      p + "-ca-key.pem -out " + p +
      "-ca.pem 2>/dev/null; "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " +
      p +
      "-key.pem "
      "-out " +
      p +
      ".csr 2>/dev/null; "
      "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > " +
      p +
      ".ext; "
      "openssl x509 -req -in " +
      p + ".csr -CA " + p + "-ca.pem -CAkey " + p +
      "-ca-key.pem "
      "-CAcreateserial -days 2 -extfile " +
      p + ".ext -out " + p + "-cert.pem 2>/dev/null";
  if (std::system(script.c_str()) != 0) throw std::runtime_error("openssl failed: " + script);
}

}  // namespace ds::test

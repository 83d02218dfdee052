#include "core/crypto.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <vector>

#include "sqlguard/errors.h"

namespace sqlguard::detail {
namespace {
std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}
}  // namespace

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw Error(ErrorCode::kInternal, "OpenSSL EVP_Digest(SHA-256) failed");
  return hex(md, len);
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1)
    throw Error(ErrorCode::kInternal, "OpenSSL RAND_bytes failed");
  return hex(buf.data(), bytes);
}

}  // namespace sqlguard::detail

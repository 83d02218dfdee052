// Internal: SHA-256 and random tokens from OpenSSL.
#pragma once

#include <string>
#include <string_view>

namespace sqlguard::detail {

std::string sha256_hex(std::string_view data);
// `bytes` random bytes from the OpenSSL CSPRNG, hex-encoded.
std::string random_hex(std::size_t bytes);

}  // namespace sqlguard::detail

// Standard base64 (RFC 4648 section 4, with padding): the encoding of AdmissionReview patches.
#pragma once

#include "proxy/inject/errors.hpp"

#include <string>
#include <string_view>

namespace claimguard::inject {

[[nodiscard]] std::string base64_encode(std::string_view bytes);
// Strict: the length must be a multiple of 4, padding only at the end, no whitespace.
[[nodiscard]] result<std::string> base64_decode(std::string_view text);

}  // namespace claimguard::inject

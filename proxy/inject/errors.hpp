// Errors of the injection webhook's pure layer (AdmissionReview decoding, value parsing).
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

namespace claimguard::inject {

enum class errc {
    ok = 0,
    not_json,              // the body is not a JSON document
    too_deep,              // the JSON nests deeper than max_json_depth
    not_admission_review,  // no "request" object, or the wrong kind
    missing_uid,           // request.uid is absent or not a string
    bad_object,            // request.object is not a JSON object
    bad_base64,            // a character outside the base64 alphabet, or bad padding
    bad_version,           // a Kubernetes version that is not "major.minor[...]"
    bad_host_port,         // not "host:port" with a DNS name or IP literal and a port 1..65535
};

const boost::system::error_category& inject_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), inject_category()}; }

template <class T>
using result = boost::system::result<T>;

}  // namespace claimguard::inject

namespace boost::system {
template <>
struct is_error_code_enum<claimguard::inject::errc> : std::true_type {};
}  // namespace boost::system

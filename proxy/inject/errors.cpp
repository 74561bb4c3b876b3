// The error category of the injection webhook's pure layer.
#include "proxy/inject/errors.hpp"

#include <string>

namespace claimguard::inject {

namespace {
class inject_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "claimguard.inject"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::ok: return "ok";
            case errc::not_json: return "the request body is not JSON";
            case errc::too_deep: return "the request body nests JSON too deeply";
            case errc::not_admission_review: return "the request body is not an AdmissionReview with a request";
            case errc::missing_uid: return "the AdmissionReview request has no uid";
            case errc::bad_object: return "the AdmissionReview request has no object";
            case errc::bad_base64: return "invalid base64";
            case errc::bad_version: return "not a Kubernetes version (expected major.minor, e.g. 1.29)";
            case errc::bad_host_port: return "not host:port (a DNS name or IP address and a port 1-65535)";
        }
        return "unknown inject error";
    }
};
}  // namespace

const boost::system::error_category& inject_category() noexcept {
    static const inject_category_impl cat;
    return cat;
}

}  // namespace claimguard::inject

// Every `serve` setting in one table: its YAML key, environment variable and flag are the
// same name, so the config file, CLAIMGUARD_* variables and flags stay in step.
// Precedence: flag > environment > config file > default.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "proxy_options.hpp"

namespace claimguard::config {

struct setting {
    std::string_view name;  // YAML key; flag --name with '_' as '-'; env CLAIMGUARD_NAME
    std::string_view help;
    bool repeatable = false;  // a list (YAML sequence, repeated flag, comma-separated env)
    std::function<void(proxy_options&, std::string_view)> set;  // throws std::invalid_argument
    std::function<std::string(const proxy_options&)> show;
    std::string_view type = "TEXT";  // what --help shows: DURATION, BOOL, HOST:PORT, BYTES, ...
    std::string_view group;          // the --help section
    bool secret = false;             // never printed (validate --print-config redacts it)

    [[nodiscard]] bool is_bool() const { return type == "BOOL"; }
};

const std::vector<setting>& serve_settings();

// The Redis password's only source besides redis_password_file (secrets are never flags).
constexpr const char* redis_password_env = "CLAIMGUARD_REDIS_PASSWORD";

// A problem with one setting, with where it came from ("file:line:column", "CLAIMGUARD_X", "--x").
class config_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Applies a YAML config file. Unknown keys and bad values are errors with file:line:column.
void apply_config_file(const std::string& path, proxy_options& options);
// Applies every CLAIMGUARD_<NAME> variable that is set.
void apply_environment(proxy_options& options, const std::function<const char*(const char*)>& getenv);
// Applies one setting by name (flags). Throws config_error.
void apply_setting(proxy_options& options, std::string_view name, const std::vector<std::string>& values,
                   std::string_view source);

std::string flag_name(std::string_view name);  // max_connections -> max-connections
std::string env_name(std::string_view name);   // max_connections -> CLAIMGUARD_MAX_CONNECTIONS

// "250ms", "1.5s", "2m", "8h": rules/model/duration.hpp. Throws std::invalid_argument saying why
// (a bare number has no unit, and is refused).
std::chrono::milliseconds parse_duration(std::string_view text);

// The effective configuration as a config file (`validate --print-config`): every setting,
// secrets redacted, the Redis password's presence as a comment.
std::string render_config(const proxy_options& options);

// Whether `host` is a loopback address: localhost, 127.0.0.0/8 or ::1.
bool is_loopback_host(std::string_view host);

// Checks what a single setting cannot: the backend is required, the control endpoint is loopback
// unless control_allow_non_loopback, Redis options go together. Throws config_error.
void validate(const proxy_options& options);

}  // namespace claimguard::config

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

// "250ms", "5s", "2m", "8h", or a bare number of `bare_unit`.
std::chrono::milliseconds parse_duration(std::string_view text, std::chrono::milliseconds bare_unit);

// Checks what a single setting cannot: e.g. a non-loopback admin address is allowed, but rules
// are needed for Redis to matter. Throws config_error.
void validate(const proxy_options& options);

}  // namespace claimguard::config

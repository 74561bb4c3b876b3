// Prometheus registry: metric families, validation and the text exposition format 0.0.4.
#include "proxy/admin/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

namespace claimguard::admin {

namespace {

bool is_name_char(char c, bool first, bool allow_colon) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    return alpha || (allow_colon && c == ':') || (!first && digit);
}

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names: [a-zA-Z_][a-zA-Z0-9_]*, not "__..." nor "le".
bool is_valid_name(std::string_view name, bool is_label) {
    if (name.empty())
        return false;
    for (std::size_t i = 0; i < name.size(); ++i)
        if (!is_name_char(name[i], i == 0, !is_label))
            return false;
    return !is_label || (!name.starts_with("__") && name != "le");
}

void append_escaped(std::string& out, std::string_view s, bool escape_quote) {
    for (const char c : s) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '"':
            if (escape_quote) {
                out += "\\\"";
                break;
            }
            [[fallthrough]];
        default: out += c;
        }
    }
}

// Shortest round-trip decimal form; the format's spellings for the non-finite values.
void append_double(std::string& out, double v) {
    if (std::isnan(v))
        out += "NaN";
    else if (std::isinf(v))
        out += v > 0 ? "+Inf" : "-Inf";
    else
        fmt::format_to(std::back_inserter(out), "{}", v);
}

void append_header(std::string& out, const family_base& f) {
    static constexpr std::string_view type_names[] = {"counter", "gauge", "histogram"};
    out += "# HELP ";
    out += f.name();
    out += ' ';
    append_escaped(out, f.help(), false);
    out += "\n# TYPE ";
    out += f.name();
    out += ' ';
    out += type_names[static_cast<int>(f.type())];
    out += '\n';
}

// `name{a="x",b="y"}` (or just `name`), with an optional extra label (histogram "le").
void append_series(std::string& out, std::string_view name, std::string_view suffix,
                   const std::vector<std::string>& label_names, const std::vector<std::string>& values,
                   std::string_view extra_label = {}, std::string_view extra_value = {}) {
    out += name;
    out += suffix;
    if (label_names.empty() && extra_label.empty())
        return;
    out += '{';
    for (std::size_t i = 0; i < label_names.size(); ++i) {
        if (i != 0)
            out += ',';
        out += label_names[i];
        out += "=\"";
        append_escaped(out, values[i], true);
        out += '"';
    }
    if (!extra_label.empty()) {
        if (!label_names.empty())
            out += ',';
        out += extra_label;
        out += "=\"";
        out += extra_value;
        out += '"';
    }
    out += '}';
}

void append_sample(std::string& out, const family_base& f, const std::vector<std::string>& values,
                   const counter& c) {
    append_series(out, f.name(), {}, f.label_names(), values);
    fmt::format_to(std::back_inserter(out), " {}\n", c.value());
}

void append_sample(std::string& out, const family_base& f, const std::vector<std::string>& values,
                   const gauge& g) {
    append_series(out, f.name(), {}, f.label_names(), values);
    fmt::format_to(std::back_inserter(out), " {}\n", g.value());
}

void append_sample(std::string& out, const family_base& f, const std::vector<std::string>& values,
                   const histogram& h) {
    const histogram::snapshot s = h.collect();
    const auto bounds = h.upper_bounds();
    std::string le;
    for (std::size_t i = 0; i <= bounds.size(); ++i) {
        le.clear();
        append_double(le, i < bounds.size() ? bounds[i] : INFINITY);
        append_series(out, f.name(), "_bucket", f.label_names(), values, "le", le);
        fmt::format_to(std::back_inserter(out), " {}\n", s.cumulative[i]);
    }
    append_series(out, f.name(), "_sum", f.label_names(), values);
    out += ' ';
    append_double(out, s.sum);
    out += '\n';
    append_series(out, f.name(), "_count", f.label_names(), values);
    fmt::format_to(std::back_inserter(out), " {}\n", s.count);
}

std::vector<double> checked_bounds(std::span<const double> bounds) {
    for (std::size_t i = 0; i < bounds.size(); ++i) {
        if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i])))
            throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
    }
    return {bounds.begin(), bounds.end()};
}

}  // namespace

histogram::histogram(std::span<const double> upper_bounds)
    : bounds_(checked_bounds(upper_bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void histogram::observe(double value) noexcept {
    // First bound >= value; NaN compares false everywhere and lands in +Inf.
    const auto it = std::partition_point(bounds_.begin(), bounds_.end(), [value](double bound) {
        return !(value <= bound);
    });
    buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
}

histogram::snapshot histogram::collect() const {
    snapshot s;
    s.cumulative.reserve(bounds_.size() + 1);
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
        s.count += buckets_[i].load(std::memory_order_relaxed);
        s.cumulative.push_back(s.count);
    }
    s.sum = sum_.load(std::memory_order_relaxed);
    return s;
}

family_base::family_base(metric_type type, std::string name, std::string help, std::vector<std::string> label_names,
                         std::vector<double> bounds)
    : type_(type), name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

template <class Metric>
Metric& family<Metric>::with_values(std::span<const std::string_view> values) {
    if (values.size() != label_names().size())
        throw std::invalid_argument(fmt::format("metric {} takes {} label values, got {}", name(),
                                                label_names().size(), values.size()));
    std::vector<std::string> key(values.begin(), values.end());
    const std::lock_guard lock(mutex_);
    auto it = children_.find(key);
    if (it == children_.end()) {
        std::unique_ptr<Metric> child;
        if constexpr (std::is_same_v<Metric, histogram>)
            child = std::make_unique<histogram>(bounds());
        else
            child = std::make_unique<Metric>();
        it = children_.emplace(std::move(key), std::move(child)).first;
    }
    return *it->second;
}

template <class Metric>
void family<Metric>::render(std::string& out) const {
    const std::lock_guard lock(mutex_);
    if (children_.empty())
        return;
    append_header(out, *this);
    for (const auto& [values, child] : children_)
        append_sample(out, *this, values, *child);
}

template <class Metric>
void family<Metric>::clear() {
    const std::lock_guard lock(mutex_);
    children_.clear();
}

template class family<counter>;
template class family<gauge>;
template class family<histogram>;

registry::registry() = default;
registry::~registry() = default;

family_base& registry::add(metric_type type, std::string_view name, std::string_view help,
                           std::initializer_list<std::string_view> label_names, std::span<const double> bounds) {
    if (!is_valid_name(name, false))
        throw std::invalid_argument(fmt::format("invalid metric name \"{}\"", name));
    std::vector<std::string> labels;
    for (const std::string_view l : label_names) {
        if (!is_valid_name(l, true))
            throw std::invalid_argument(fmt::format("metric {}: invalid label name \"{}\"", name, l));
        if (std::find(labels.begin(), labels.end(), l) != labels.end())
            throw std::invalid_argument(fmt::format("metric {}: label \"{}\" given twice", name, l));
        labels.emplace_back(l);
    }
    std::vector<double> checked = type == metric_type::histogram ? checked_bounds(bounds) : std::vector<double>{};

    const std::lock_guard lock(mutex_);
    for (const auto& f : families_) {
        if (f->name() != name)
            continue;
        if (f->type() != type || f->label_names() != labels || f->bounds() != checked)
            throw std::invalid_argument(fmt::format("metric {} is already registered differently", name));
        return *f;
    }
    std::unique_ptr<family_base> f;
    switch (type) {
    case metric_type::counter:
        f = std::make_unique<family<counter>>(type, std::string(name), std::string(help), std::move(labels),
                                              std::move(checked));
        break;
    case metric_type::gauge:
        f = std::make_unique<family<gauge>>(type, std::string(name), std::string(help), std::move(labels),
                                            std::move(checked));
        break;
    case metric_type::histogram:
        f = std::make_unique<family<histogram>>(type, std::string(name), std::string(help), std::move(labels),
                                                std::move(checked));
        break;
    }
    families_.push_back(std::move(f));
    return *families_.back();
}

family<counter>& registry::counter_family(std::string_view name, std::string_view help,
                                          std::initializer_list<std::string_view> label_names) {
    return static_cast<family<counter>&>(add(metric_type::counter, name, help, label_names, {}));
}

family<gauge>& registry::gauge_family(std::string_view name, std::string_view help,
                                      std::initializer_list<std::string_view> label_names) {
    return static_cast<family<gauge>&>(add(metric_type::gauge, name, help, label_names, {}));
}

family<histogram>& registry::histogram_family(std::string_view name, std::string_view help,
                                              std::initializer_list<std::string_view> label_names,
                                              std::span<const double> bounds) {
    return static_cast<family<histogram>&>(add(metric_type::histogram, name, help, label_names, bounds));
}

counter& registry::add_counter(std::string_view name, std::string_view help) {
    return counter_family(name, help, {}).with();
}

gauge& registry::add_gauge(std::string_view name, std::string_view help) {
    return gauge_family(name, help, {}).with();
}

histogram& registry::add_histogram(std::string_view name, std::string_view help, std::span<const double> bounds) {
    return histogram_family(name, help, {}, bounds).with();
}

void registry::add_collector(std::function<void(std::string&)> collector) {
    const std::lock_guard lock(mutex_);
    collectors_.push_back(std::move(collector));
}

std::string registry::render() const {
    std::string out;
    const std::lock_guard lock(mutex_);
    for (const auto& f : families_)
        f->render(out);
    for (const auto& c : collectors_) c(out);
    return out;
}

registry& default_registry() {
    static registry r;
    return r;
}

}  // namespace claimguard::admin

// The reply view: where a reply's packets are, and their decoding on demand.
#include "reply_view.hpp"

#include <charconv>
#include <limits>

#include "capabilities.hpp"
#include "frame.hpp"
#include "packets.hpp"

namespace claimguard::protocol {
namespace {

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// `written` (bare, or in `, " or ' with doubled quotes inside) equals `target` ignoring ASCII case.
bool written_name_equals(std::string_view written, std::string_view target) {
    char quote = 0;
    if (written.size() >= 2 && (written.front() == '`' || written.front() == '"' || written.front() == '\'') &&
        written.back() == written.front()) {
        quote = written.front();
        written = written.substr(1, written.size() - 2);
    }
    std::size_t j = 0;
    for (std::size_t i = 0; i < written.size(); ++i) {
        if (j >= target.size() || ascii_lower(written[i]) != ascii_lower(target[j])) return false;
        ++j;
        if (quote != 0 && written[i] == quote && i + 1 < written.size() && written[i + 1] == quote) ++i;
    }
    return j == target.size();
}

}  // namespace

bool column_name_matches(const column_definition& column, std::string_view name) {
    return written_name_equals(name, column.name) || written_name_equals(name, column.org_name);
}

std::optional<std::size_t> column_index(std::span<const column_definition> columns, std::string_view name) {
    if (name.empty()) return std::nullopt;
    for (std::size_t i = 0; i < columns.size(); ++i)
        if (column_name_matches(columns[i], name)) return i;
    return std::nullopt;
}

std::optional<std::size_t> counter_column(std::span<const column_definition> columns,
                                          std::optional<std::uint32_t> position, std::string_view label) {
    const auto index = position ? std::optional<std::size_t>(*position) : column_index(columns, label);
    if (!index || *index >= columns.size()) return std::nullopt;
    return index;
}

std::optional<std::int64_t> counter_value(std::string_view text) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

std::optional<std::int64_t> counter_value(const binary_value& value) {
    if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
    if (const auto* u = std::get_if<std::uint64_t>(&value))
        return *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                   ? std::optional<std::int64_t>(static_cast<std::int64_t>(*u))
                   : std::nullopt;
    if (const auto* b = std::get_if<bytes_view>(&value)) return counter_value(as_chars(*b));
    return std::nullopt;
}

reply_view::reply_view(std::vector<reply_packet> packets, std::uint32_t capabilities,
                       std::uint32_t mariadb_capabilities)
    : packets_(std::move(packets)), capabilities_(capabilities), mariadb_capabilities_(mariadb_capabilities) {
    index();
}

reply_view::reply_view(std::span<const byte_buffer> payloads, std::uint32_t capabilities,
                       std::uint32_t mariadb_capabilities)
    : capabilities_(capabilities), mariadb_capabilities_(mariadb_capabilities) {
    packets_.reserve(payloads.size());
    for (const auto& p : payloads) packets_.push_back({p, true});
    index();
}

void reply_view::index() {
    if (packets_.empty() || packets_[0].payload.empty()) return;
    const auto& head = packets_[0];
    switch (head.payload[0]) {
        case ok_header: kind_ = reply_kind::ok; return;
        case err_header: kind_ = reply_kind::err; return;
        case local_infile_header: kind_ = reply_kind::local_infile; return;
        default: break;
    }
    if (!head.whole) return;
    auto count = parse_column_count(head.payload);
    if (!count) return;
    kind_ = reply_kind::result_set;
    columns_ = static_cast<std::size_t>(*count);
    rows_at_ = 1 + columns_ + ((capabilities_ & cap::deprecate_eof) ? 0 : 1);
    if (rows_at_ > packets_.size()) {  // end_ stays malformed
        rows_at_ = packets_.size();
        return;
    }
    end_ = rows_end::incomplete;
    for (std::size_t i = rows_at_; i < packets_.size(); ++i) {
        const auto& p = packets_[i];
        if (p.payload.empty()) {
            end_ = rows_end::malformed;
            return;
        }
        if (p.payload[0] == err_header) {
            end_ = rows_end::error;
            return;
        }
        if (p.whole && is_eof_packet(p.payload, capabilities_)) {
            end_ = rows_end::closed;
            return;
        }
        ++row_count_;
    }
}

result<column_definition> reply_view::column(std::size_t i) const {
    if (i >= columns_ || 1 + i >= packets_.size()) return errc::unexpected_packet;
    const auto& p = packets_[1 + i];
    if (!p.whole) return errc::truncated;
    return parse_column_definition(p.payload, mariadb_capabilities_);
}

result<std::vector<column_definition>> reply_view::columns() const {
    std::vector<column_definition> out;
    out.reserve(columns_);
    for (std::size_t i = 0; i < columns_; ++i) {
        auto c = column(i);
        if (!c) return c.error();
        out.push_back(*c);
    }
    return out;
}

result<std::vector<value_type>> reply_view::column_types() const {
    std::vector<value_type> out;
    out.reserve(columns_);
    for (std::size_t i = 0; i < columns_; ++i) {
        auto c = column(i);
        if (!c) return c.error();
        out.push_back(value_type_of(*c));
    }
    return out;
}

std::optional<std::size_t> reply_view::column_index(std::string_view name) const {
    auto cols = columns();
    if (!cols) return std::nullopt;
    return protocol::column_index(*cols, name);
}

std::span<const reply_packet> reply_view::metadata() const {
    return std::span<const reply_packet>(packets_).first(kind_ == reply_kind::result_set ? rows_at_ : 0);
}

std::optional<bytes_view> reply_view::metadata_eof() const {
    if (kind_ != reply_kind::result_set || (capabilities_ & cap::deprecate_eof) || rows_at_ != 2 + columns_)
        return std::nullopt;
    return packets_[1 + columns_].payload;
}

result<text_row> reply_view::text_values(std::size_t i) const {
    if (i >= row_count_) return errc::unexpected_packet;
    const auto& p = row(i);
    if (!p.whole) return errc::truncated;
    return parse_text_row(p.payload, columns_);
}

result<binary_row> reply_view::binary_values(std::size_t i, std::span<const value_type> types) const {
    if (i >= row_count_) return errc::unexpected_packet;
    const auto& p = row(i);
    if (!p.whole) return errc::truncated;
    return parse_binary_row(p.payload, types);
}

bytes_view reply_view::closing() const {
    if (kind_ != reply_kind::result_set || (end_ != rows_end::closed && end_ != rows_end::error)) return {};
    return packets_[rows_at_ + row_count_].payload;
}

std::size_t reply_view::packets_after() const {
    if (kind_ == reply_kind::result_set) {
        if (end_ != rows_end::closed && end_ != rows_end::error) return 0;
        return packets_.size() - (rows_at_ + row_count_ + 1);
    }
    return packets_.empty() ? 0 : packets_.size() - 1;
}

result<reply_view> read_reply(bytes_view raw, std::uint32_t capabilities, std::uint32_t mariadb_capabilities,
                              std::size_t max_payload) {
    std::vector<reply_packet> packets;
    while (!raw.empty()) {
        auto scan = scan_packet(raw, max_payload);
        if (!scan) return scan.error();
        if (scan->raw_size == 0) return errc::truncated;
        packets.push_back({scan->first_payload, scan->frames == 1});
        raw = raw.subspan(scan->raw_size);
    }
    return reply_view(std::move(packets), capabilities, mariadb_capabilities);
}

}  // namespace claimguard::protocol

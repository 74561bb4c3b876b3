// group_update: the takes of one key a leader sends as one conditional UPDATE, decided one by
// one. I/O-free: next() says which takes the next UPDATE sums, the reply goes back to on_changed()
// or on_error(). A batch that changes no row is split (its first half in queue order, then the
// rest) until every take is decided, so the units taken are exactly the sum of the takes decided
// taken: never more than the stock, none left taken for a take decided sold out.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace claimguard::engine {

class group_take {
public:
    enum class outcome : std::uint8_t { undecided, taken, sold_out, failed };

    // The next UPDATE: how many takes and their summed units.
    struct batch {
        std::int64_t units = 0;
        std::int64_t takes = 0;
    };

    // Each take's units, in queue order (the leader's first).
    explicit group_take(std::vector<std::int64_t> units);

    // The next UPDATE to send; empty: every take is decided.
    [[nodiscard]] std::optional<batch> next();
    // The reply to next()'s UPDATE: it changed the row (every take of it took its units) or not.
    void on_changed(bool changed);
    // The UPDATE failed (an error, or the connection was lost): nothing of it was taken; every take
    // not decided yet gets this error.
    void on_error(std::uint16_t code);

    [[nodiscard]] std::size_t size() const { return units_.size(); }
    [[nodiscard]] outcome of(std::size_t i) const { return outcomes_[i]; }
    [[nodiscard]] std::int64_t units(std::size_t i) const { return units_[i]; }
    [[nodiscard]] std::uint16_t error_code() const { return error_code_; }
    [[nodiscard]] std::int64_t taken_units() const;
    [[nodiscard]] std::size_t statements() const { return statements_; }
    // The smallest take decided sold out (0: none): takes of as many units or more do not fit now.
    [[nodiscard]] std::int64_t sold_out_units() const { return sold_out_units_; }

private:
    std::vector<std::int64_t> units_;
    std::vector<outcome> outcomes_;
    std::deque<std::vector<std::size_t>> work_;  // the parts still to send, in queue order
    std::vector<std::size_t> current_;           // the takes of the UPDATE sent last
    std::uint16_t error_code_ = 0;
    std::size_t statements_ = 0;
    std::int64_t sold_out_units_ = 0;
};

}  // namespace claimguard::engine

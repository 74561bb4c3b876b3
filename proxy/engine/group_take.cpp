// One key's grouped takes split until each is decided (group_update).
#include "group_take.hpp"

#include <numeric>

namespace claimguard::engine {

group_take::group_take(std::vector<std::int64_t> units)
    : units_(std::move(units)), outcomes_(units_.size(), outcome::undecided) {
    std::vector<std::size_t> all(units_.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    if (!all.empty()) work_.push_back(std::move(all));
}

std::optional<group_take::batch> group_take::next() {
    current_.clear();
    while (!work_.empty()) {
        auto part = std::move(work_.front());
        work_.pop_front();
        // A take decided sold out meanwhile (one as large found the floor) leaves the part.
        for (auto i : part)
            if (outcomes_[i] == outcome::undecided) current_.push_back(i);
        if (current_.empty()) continue;
        batch b;
        for (auto i : current_) b.units += units_[i];
        b.takes = static_cast<std::int64_t>(current_.size());
        ++statements_;
        return b;
    }
    return std::nullopt;
}

void group_take::on_changed(bool changed) {
    if (current_.empty()) return;
    if (changed) {
        for (auto i : current_) outcomes_[i] = outcome::taken;
    } else if (current_.size() == 1) {
        // One take alone found the floor: so would every take as large, until the stock grows
        // (the admission gate answers its queue the same way: note_sold_out).
        const auto u = units_[current_.front()];
        sold_out_units_ = sold_out_units_ == 0 ? u : std::min(sold_out_units_, u);
        for (std::size_t i = 0; i < units_.size(); ++i)
            if (outcomes_[i] == outcome::undecided && units_[i] >= u) outcomes_[i] = outcome::sold_out;
    } else {
        // Some of them may still fit: the first half (queue order), then the rest.
        const auto half = current_.size() / 2;
        work_.emplace_front(current_.begin() + static_cast<std::ptrdiff_t>(half), current_.end());
        work_.emplace_front(current_.begin(), current_.begin() + static_cast<std::ptrdiff_t>(half));
    }
    current_.clear();
}

void group_take::on_error(std::uint16_t code) {
    error_code_ = code;
    for (auto& o : outcomes_)
        if (o == outcome::undecided) o = outcome::failed;
    work_.clear();
    current_.clear();
}

std::int64_t group_take::taken_units() const {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < units_.size(); ++i)
        if (outcomes_[i] == outcome::taken) sum += units_[i];
    return sum;
}

}  // namespace claimguard::engine

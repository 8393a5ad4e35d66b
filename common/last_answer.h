// The last question put to a costly host function, and its answer: a caller
// that asks the same question many times (a plan, per call of a stage) pays
// for it once. Key needs ==; a failed computation leaves no answer behind.
#pragma once

#include <optional>
#include <utility>

namespace cce {

template <class Key, class Answer>
class LastAnswer {
 public:
  template <class Compute>
  const Answer& get(const Key& key, Compute&& compute) {
    if (!key_.has_value() || !(*key_ == key)) {
      answer_ = std::forward<Compute>(compute)();
      key_ = key;
    }
    return answer_;
  }

 private:
  std::optional<Key> key_;  // none: no question yet
  Answer answer_{};
};

}  // namespace cce

#pragma once
/// What a cumulative energy counter did, learned from reading it: its updates, when each one
/// happened, and so its value at any instant between two updates.
///
/// A GPU energy counter does not count continuously: it jumps every ~100 ms, at times that drift
/// and jitter per device, and a read tells neither when the value it returns was produced nor
/// (on some drivers) anything trustworthy through its timestamp. A window edge that takes the
/// value read at the edge is up to one period stale, so the difference of two reads is off by up
/// to a period of energy at each edge. CounterHistory fixes that without trusting timestamps:
///
///  - every read is an observation; each new value is an update record whose time is bracketed
///    by the last read that still showed the old value and the first read that showed the new
///    one;
///  - a model of the schedule (period, phase, jitter) is fitted by least squares to the updates
///    whose brackets are narrow (a follower reads densely around some predicted updates), or to
///    the driver's timestamps once they are shown to be update times (the same value always
///    carries the same stamp); it gives every update its index and an estimated time inside its
///    bracket (the mean of the model's prediction truncated to the bracket);
///  - the value at an instant t is interpolated linearly between the update before t and the one
///    after it — exactly what the sensor's own figure for that period spreads over it — once the
///    update after t has been read; until then it is extrapolated from the last update at the
///    power of the last period (or the instant power read with the value).
///
/// Values are in any unit (the monitor feeds mJ), times in ns of the monitor's clock. Pure: no
/// I/O, no clock, no threads; not thread-safe (the owner locks).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace erg::measure {

/// One read of a cumulative counter.
struct CounterRead {
  std::int64_t t_ns = 0;  ///< When it was read (monitor clock); reads come in time order.
  /// A time before the driver was asked: the read sampled the counter between this and t_ns (a
  /// reader preempted around the call knows no better). A value still unchanged is then known
  /// unchanged only from here; a new one known from t_ns. nullopt: t_ns (an instant read).
  std::optional<std::int64_t> asked_ns;
  double value = 0.0;  ///< The (monotonic, accumulated) counter value.
  /// The driver's time for the value (monitor clock), if it gave one. Used only once stamps are
  /// shown to be update times.
  std::optional<std::int64_t> stamp_ns;
  /// Instant power read with the value, in value units per second, if any.
  std::optional<double> power;
};

/// The counter's update schedule as learned so far.
struct UpdateSchedule {
  bool locked = false;      ///< Period and phase known (updates get indices and times).
  bool continuous = false;  ///< The counter changes on (almost) every read: no staleness.
  /// Driver stamps: nullopt undecided, true update times (trusted), false read times (ignored).
  std::optional<bool> stamps_are_update_times;
  std::chrono::nanoseconds period{0};  ///< Estimated update period (0 until known).
  std::chrono::nanoseconds jitter{0};  ///< Estimated σ of an update's offset from the schedule.
  std::size_t fitted_updates = 0;      ///< Updates the fit used.
  /// A schedule that the updates contradicted (see `relearns`) is being learned again: values
  /// around the updates since the change are plain reads (CounterEstimate::plain) until it locks.
  bool relearning = false;
  /// Times a locked schedule was found contradicted by the updates (a wrong lock, drift, a phase
  /// jump, a changed period) and dropped to be learned again from the updates after the change.
  std::uint64_t relearns = 0;
  /// Pinned updates left out of the fit as too far off the schedule (one late or early update).
  std::uint64_t outliers = 0;
};

/// The value of a counter at an instant.
struct CounterEstimate {
  double value = 0.0;
  /// The update after the instant was read: the value is interpolated between the two updates
  /// around it (final). False: extrapolated from the last update (may still change).
  bool final = false;
  /// Non-zero when the two reads around the instant missed updates between them (the reader was
  /// starved for more than a period): the span they leave, over which the value is interpolated
  /// evenly instead of as the sensor counted it period by period.
  std::int64_t unread_ns = 0;
  std::int64_t unread_from = 0;  ///< Where that span begins (the update read before it).
  /// The schedule was not trusted around the instant (being relearned after the updates
  /// contradicted it): the value is the one read last at or before it, as a plain difference of
  /// reads takes it (or the last update the trusted schedule placed before it, if that is more),
  /// off by up to a period's increment.
  bool plain = false;
};

/// The newest update against the one before it, as the reads bracket them.
struct UpdateStep {
  double increase = 0.0;  ///< The counter's increase from the update before.
  /// The least and the most time between the two updates: the last read that still showed the
  /// old value less the first read that showed the one before it, and the first read that
  /// showed the new value less the last read before the earlier update.
  std::int64_t least_span_ns = 0;
  std::int64_t most_span_ns = 0;
  /// Updates the schedule puts from the earlier one to the newest (1: consecutive); 0 unless
  /// both are placed on a locked schedule.
  std::int64_t updates = 0;
};

class CounterHistory {
 public:
  /// `nominal_period`: the vendor's stated update period (a prior until one is measured).
  explicit CounterHistory(std::chrono::nanoseconds nominal_period = std::chrono::milliseconds(100),
                          std::size_t capacity = 512);

  /// Feeds one read (in time order; a read older than the newest is ignored).
  void add(const CounterRead& read);

  /// The counter's value at `t_ns`; nullopt before the first read or older than the kept
  /// updates.
  [[nodiscard]] std::optional<CounterEstimate> value_at(std::int64_t t_ns) const;
  /// True once value_at(t) is final: the first update after `t` has been read.
  [[nodiscard]] bool final_at(std::int64_t t_ns) const;
  /// When the first update after `t_ns` is expected (the model's prediction plus three σ, so a
  /// read then sees it); nullopt before the schedule is locked.
  [[nodiscard]] std::optional<std::int64_t> update_expected_after(std::int64_t t_ns) const;
  /// Where `t_ns` falls on the update grid, in periods (update k is predicted at k); nullopt
  /// unless locked and not continuous.
  [[nodiscard]] std::optional<double> grid_position(std::int64_t t_ns) const;
  /// The predicted time of update `index` (nullopt unless locked).
  [[nodiscard]] std::optional<std::int64_t> predicted_time(std::int64_t index) const;
  /// Index of the newest update seen (nullopt unless locked and seen).
  [[nodiscard]] std::optional<std::int64_t> last_index() const;
  /// Estimated time of the newest update (nullopt before any).
  [[nodiscard]] std::optional<std::int64_t> last_update_time() const;
  /// Time of the newest read (nullopt before any).
  [[nodiscard]] std::optional<std::int64_t> last_read_time() const;
  /// The newest update against the one before it (nullopt before two updates were seen, or when
  /// the earlier one is only a guess: the first value read).
  [[nodiscard]] std::optional<UpdateStep> last_step() const;

  [[nodiscard]] const UpdateSchedule& schedule() const { return schedule_; }
  /// The counter's recent rate (value units per ns) over the last few consecutive updates, or
  /// the instant power read with the newest value; 0 when neither is known yet.
  [[nodiscard]] double recent_rate() const { return tail_rate_; }
  /// An update came earlier than the schedule expects, by an amount its reads do not pin: the
  /// reader should pin the next update (read densely around it) so the schedule is checked on it.
  [[nodiscard]] bool wants_pinned_update() const { return pin_wanted_; }
  /// Updates (distinct values) seen so far.
  [[nodiscard]] std::uint64_t updates_seen() const { return updates_seen_; }
  /// Reads fed so far.
  [[nodiscard]] std::uint64_t reads() const { return reads_; }

 private:
  struct Record {
    double value = 0.0;
    std::int64_t lo = 0;         // the update happened after this read (the last one of the old value)
    std::int64_t hi = 0;         // ... and by this one (the first read of this value)
    std::int64_t last_seen = 0;  // the last read that still showed this value
    std::optional<std::int64_t> stamp;
    std::optional<std::int64_t> index;  // grid index once locked
    std::optional<double> power;        // instant power read with the value
    std::int64_t time = 0;              // estimated update time (cached; see estimate_times)
    // No read showed the value before this one (the first record): `lo` is only a guess.
    bool open = false;
    // Left out of fits: a pinned time too far off the schedule.
    bool outlier = false;
    // Its time was not placed by a trusted schedule (see UpdateSchedule::trusted).
    bool untrusted = false;
    std::uint64_t seq = 0;  // order of arrival (records_ drops old ones from the front)
  };

  void add_record(const CounterRead& read);
  void note_stamps(const CounterRead& read);
  void try_lock();
  void refit();
  void fit();
  // 1 contradicts, 0 agrees, 2 came early by an amount the bracket does not pin, -1 says nothing.
  [[nodiscard]] int check(const Record& r) const;
  void note_check(bool miss);
  void relearn();
  void check_stamp(const Record& r);
  void trust_stamps(bool trust);
  void assign_index(Record& r, const Record* prev) const;
  void estimate_times();
  [[nodiscard]] std::int64_t estimate(const Record& r) const;
  /// The fitted line of the schedule, and the predicted time of update `index`: the line, plus
  /// (for a drifting schedule) the offsets of the pinned updates around it.
  [[nodiscard]] double line(double index) const { return phase_ + index * period_; }
  [[nodiscard]] double grid(double index) const { return line(index) + (drifting_ ? drift_at(index) : 0.0); }
  [[nodiscard]] double drift_at(double index) const;
  [[nodiscard]] double rate_before(std::size_t k) const;
  [[nodiscard]] double recent_period_energy() const;
  [[nodiscard]] bool narrow(const Record& r) const;
  [[nodiscard]] double prelock_period() const;
  [[nodiscard]] std::optional<CounterEstimate> plain_at(std::int64_t t_ns, std::size_t k) const;
  [[nodiscard]] double prelock_hold() const;  // the longest a value is shown before the lock
  void place_open_before_narrow();
  void fix_open_index();

  std::chrono::nanoseconds nominal_;
  std::size_t capacity_;
  std::deque<Record> records_;
  UpdateSchedule schedule_;
  double period_ = 0.0;  // ns
  double phase_ = 0.0;   // ns: time of index 0
  double sigma_ = 0.0;   // ns
  // A drifting schedule (its updates wander off any line, as a random walk does): the pinned
  // updates' offsets from the line, by index, interpolated between them and held after the last.
  bool drifting_ = false;
  std::vector<std::pair<double, double>> anchors_;
  std::uint64_t updates_seen_ = 0;
  std::uint64_t reads_ = 0;
  std::int64_t last_read_ = 0;
  // Stamp evidence: reads whose value repeated with the same / a different stamp; updates in a
  // row whose stamp lay inside the bracket of reads around the update, and stamps seen outside
  // their bracket (proof that they are not update times).
  int stamp_same_ = 0, stamp_moved_ = 0;
  int stamp_inside_ = 0, stamp_outside_ = 0;
  // The schedule check: the outcomes of the last checks (bit set: the update contradicted the
  // schedule), newest in bit 0, and how many are recorded (at most 8).
  std::uint32_t miss_bits_ = 0;
  std::uint64_t miss_seq_[8] = {};  // the record each check was made on, newest first
  int checks_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t learn_from_ = 0;  // the schedule is learned from records from this seq on
  std::uint64_t lock_seq_ = 0;    // the first record after the schedule last locked
  bool pin_wanted_ = false;       // see wants_pinned_update
  double tail_rate_ = 0.0;        // rate_before(last record), cached: the hot path extrapolates from it
};

}  // namespace erg::measure

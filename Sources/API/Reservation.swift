import Storage

/// Where a reservation's units come from: one client's token bucket (or buckets) of recipients.
protocol BudgetStore: Sendable {
    /// Takes `amount` units, or every whole unit there is when `amount` is nil: how many were taken, or how long until
    /// `amount` would be there (then nothing is taken).
    func take(_ amount: Int?) -> Reservation.Taken
    /// Gives `amount` units back.
    func refund(_ amount: Int)
}

/// Recipients paid for before a statement queues them, held by scope: ``withReservation(_:from:_:used:)`` takes
/// them, runs the statement, and gives back what it did not use. When the statement fails, everything comes back if
/// it surely wrote nothing (``DatabaseError/wroteNothing(_:)``), nothing if its outcome is unknown (it may have
/// queued them). No caller refunds by hand.
enum Reservation {
    enum Taken: Equatable, Sendable {
        case taken(Int)
        case wait(Duration)
    }

    enum Outcome<Result> {
        case done(Result)
        /// The budget holds too little now; nothing was taken and the body did not run.
        case refused(wait: Duration)
    }

    /// Reserves `amount` (nil: everything the budget holds), runs `body` with what was reserved, and refunds what
    /// `used` says the result did not spend.
    static func withReservation<Result>(
        _ amount: Int?,
        from store: some BudgetStore,
        _ body: (_ reserved: Int) async throws -> Result,
        used: (Result) -> Int
    ) async throws -> Outcome<Result> {
        let reserved: Int
        switch store.take(amount) {
        case .wait(let wait): return .refused(wait: wait)
        case .taken(let count): reserved = count
        }
        let result: Result
        do {
            result = try await body(reserved)
        } catch {
            if DatabaseError.wroteNothing(error) { store.refund(reserved) }
            throw error
        }
        store.refund(max(0, reserved - used(result)))
        return .done(result)
    }
}

/// A limiter's bucket for one key as a ``BudgetStore``.
struct LimiterBudget: BudgetStore {
    let limiter: RateLimiter
    let key: String

    func take(_ amount: Int?) -> Reservation.Taken {
        guard let amount else { return .taken(limiter.takeAll(key)) }
        if let wait = limiter.take(key, cost: Double(amount)) { return .wait(wait) }
        return .taken(amount)
    }

    func refund(_ amount: Int) { limiter.refund(key, Double(amount)) }
}

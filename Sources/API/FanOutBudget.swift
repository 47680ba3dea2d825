import NIOConcurrencyHelpers
import Settings

/// Notifications (recipients, not requests) a client address and a device may queue: at most `api_fanout_per_ip`
/// (`api_fanout_per_udid`) in any minute, half of it at once. Without it, one address sending a few `message`s into
/// a big room queues hundreds of thousands of notifications; the per-device limit alone is keyed by an id the
/// client makes up.
struct FanOutBudget: Sendable {
    let perIP: RateLimiter
    let perUDID: RateLimiter
    /// Each sender's last recipient count: what its next message reserves, so a message costs one statement, not a
    /// count first (a room that grew is caught by the statement and paid again exactly).
    private let lastRecipients = NIOLockedValueBox([String: Int]())

    init(limits: APILimits) {
        // A bucket of half the budget refilling half the budget per minute: at most the budget in any minute.
        perIP = RateLimiter(rate: limits.fanOutPerIP / 120, burst: limits.fanOutPerIP / 2)
        perUDID = RateLimiter(rate: limits.fanOutPerUDID / 120, burst: limits.fanOutPerUDID / 2)
    }

    var isEnabled: Bool { perIP.isEnabled || perUDID.isEnabled }

    /// One sender's two buckets (its address's and its device's) as one ``BudgetStore``.
    struct Sender: BudgetStore {
        let budget: FanOutBudget
        let address: String
        let udid: String

        /// Takes `amount` from both buckets, or from neither.
        func take(_ amount: Int?) -> Reservation.Taken {
            let count = amount ?? 0
            guard count > 0 else { return .taken(0) }
            if let wait = budget.perIP.take(address, cost: Double(count)) { return .wait(wait) }
            if let wait = budget.perUDID.take(udid, cost: Double(count)) {
                budget.perIP.refund(address, Double(count))
                return .wait(wait)
            }
            return .taken(count)
        }

        func refund(_ amount: Int) {
            guard amount > 0 else { return }
            budget.perIP.refund(address, Double(amount))
            budget.perUDID.refund(udid, Double(amount))
        }
    }

    func sender(address: String, udid: String) -> Sender { Sender(budget: self, address: address, udid: udid) }

    /// What `udid`'s last message went to, if known.
    func knownRecipients(_ udid: String) -> Int? { lastRecipients.withLockedValue { $0[udid] } }

    func remember(_ recipients: Int, for udid: String) {
        lastRecipients.withLockedValue { known in
            // Bounded: forgetting everything now and then costs each sender one count query.
            if known.count >= 100_000 { known.removeAll(keepingCapacity: true) }
            known[udid] = recipients
        }
    }
}

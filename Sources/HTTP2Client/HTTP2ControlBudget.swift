package import NIOCore

/// How many PING and SETTINGS frames a server may make this client answer: `burst` at once, `perSecond` after. Each
/// one costs a reply (and a SETTINGS a pass over the open streams); past the budget the connection ends with
/// ENHANCE_YOUR_CALM, as NIOHTTP2's own denial-of-service heuristics end one.
package struct HTTP2ControlBudget {
    package static let burst = 100
    package static let perSecond = 10

    private var tokens = Double(Self.burst)
    private var updated: NIODeadline?

    package init() {}

    /// Spends one frame's answer at `now`; false when the server has used its budget up.
    package mutating func spend(now: NIODeadline) -> Bool {
        if let updated {
            let seconds = Double((now - updated).nanoseconds) / 1e9
            tokens = min(Double(Self.burst), tokens + max(0, seconds) * Double(Self.perSecond))
        }
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

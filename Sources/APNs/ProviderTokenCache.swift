import Crypto
package import Foundation
import NIOConcurrencyHelpers

/// The token a daemon presents: made once and reused, replaced after `refreshAfter` (Apple refuses tokens older
/// than an hour and answers 429 TooManyProviderTokenUpdates to tokens replaced more often than every 20 minutes).
package final class ProviderTokenCache: Sendable {
    package static let allowedRefresh: ClosedRange<TimeInterval> = 20 * 60...60 * 60

    private struct State {
        var token: String?
        /// `bearer <token>`, the header value, made once per token (not per request).
        var authorization = ""
        var issuedAt = Date.distantPast
        /// Tokens made so far (for tests and logs).
        var generation = 0
        /// The token was already replaced after an ExpiredProviderToken: do not replace it again at once.
        var refreshedAfterExpiry = false
    }

    let signer: ProviderTokenSigner
    let refreshAfter: TimeInterval
    private let state = NIOLockedValueBox(State())

    package init(signer: ProviderTokenSigner, refreshAfter: TimeInterval = 50 * 60) {
        self.signer = signer
        self.refreshAfter = min(max(refreshAfter, Self.allowedRefresh.lowerBound), Self.allowedRefresh.upperBound)
    }

    /// The current token (and its `authorization` header value), made anew when it is `refreshAfter` old.
    package func current(now: Date = Date()) throws -> (token: String, generation: Int, authorization: String) {
        try state.withLockedValue { state in
            if let token = state.token, now.timeIntervalSince(state.issuedAt) < refreshAfter {
                return (token, state.generation, state.authorization)
            }
            return try Self.renew(&state, signer: signer, now: now)
        }
    }

    /// APNs called token `generation` expired: replace it once (true); false when it was replaced already
    /// because of an expiry and the new one is refused too (a clock or key problem: refreshing again would not help).
    package func expired(generation: Int, now: Date = Date()) throws -> Bool {
        try state.withLockedValue { state in
            guard generation == state.generation else { return true }  // already replaced
            if state.refreshedAfterExpiry { return false }
            _ = try Self.renew(&state, signer: signer, now: now)
            state.refreshedAfterExpiry = true
            return true
        }
    }

    /// A notification went through with token `generation`: a later expiry may refresh again.
    package func accepted(generation: Int) {
        state.withLockedValue { state in
            if generation == state.generation { state.refreshedAfterExpiry = false }
        }
    }

    package var generation: Int { state.withLockedValue { $0.generation } }

    private static func renew(
        _ state: inout State,
        signer: ProviderTokenSigner,
        now: Date
    ) throws -> (token: String, generation: Int, authorization: String) {
        let token = try signer.token(issuedAt: now)
        state.token = token
        state.authorization = "bearer " + token
        state.issuedAt = now
        state.generation += 1
        return (token, state.generation, state.authorization)
    }
}

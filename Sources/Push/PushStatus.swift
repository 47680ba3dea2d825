package import Logging
package import Metrics
import NIOConcurrencyHelpers

/// What `/readyz` needs to know about the daemon: how many gateway connections are up, and whether APNs refuses most
/// tokens as not valid for this topic and environment (see ``WrongEnvironmentWindow``).
package final class PushStatus: Sendable {
    private struct State {
        var connections = 0
        var environment = WrongEnvironmentWindow()
        var stalled = false
        /// Apps whose settings cannot be used, with why.
        var unusableApps: [String: String] = [:]
    }

    private let state = NIOLockedValueBox(State())
    /// 1 while the wrong-environment alarm is up (`pushchat_push_wrong_environment`).
    private let alarm: Meter?
    private let logger: Logger?

    package init(alarm: Meter? = nil, logger: Logger? = nil) {
        self.alarm = alarm
        self.logger = logger
        alarm?.set(0)
    }

    package var connectedCount: Int { state.withLockedValue { $0.connections } }

    /// The alarm is up: most recent answers were `BadDeviceToken`/`DeviceTokenNotForTopic` (binary: status 8).
    package var wrongEnvironment: Bool { state.withLockedValue { $0.environment.isRaised } }

    /// A gateway connection was closed because the gateway stopped reading, and none has delivered since.
    package var gatewayStalled: Bool { state.withLockedValue { $0.stalled } }

    func gatewayStalled(_ stalled: Bool) { state.withLockedValue { $0.stalled = stalled } }

    /// Apps the daemon cannot send for (their files cannot be used), with why, by name.
    package var unusableApps: [(name: String, reason: String)] {
        state.withLockedValue { $0.unusableApps.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    func appUnusable(_ name: String, reason: String) { state.withLockedValue { $0.unusableApps[name] = reason } }
    func appUsable(_ name: String) { state.withLockedValue { $0.unusableApps[name] = nil } }

    func connectionOpened() { state.withLockedValue { $0.connections += 1 } }
    func connectionClosed() { state.withLockedValue { $0.connections -= 1 } }

    /// Counts answers: `wrong` of them said the token is not valid for this topic and environment, `other` said
    /// anything else (accepted, or another reason).
    func answered(wrong: Int = 0, other: Int = 0) {
        let (change, share) = state.withLockedValue { state -> (WrongEnvironmentWindow.Change?, Double) in
            var change = state.environment.record(wrong: false, count: other)
            change = state.environment.record(wrong: true, count: wrong) ?? change
            return (change, state.environment.share)
        }
        switch change {
        case .raised:
            alarm?.set(1)
            logger?.critical(
                "APNs or FCM refuses \(Int(share * 100))% of recent tokens for these credentials (BadDeviceToken, DeviceTokenNotForTopic, SENDER_ID_MISMATCH): wrong topic or environment? (sandbox tokens sent to production, the wrong apns_topic, or another Firebase project's service account). Those notifications fail; no user is deleted for it"
            )
        case .cleared:
            alarm?.set(0)
            logger?.notice("APNs accepts most tokens again: the wrong-environment alarm is cleared")
        case nil:
            break
        }
    }
}

import APNs
import Metrics
import NIOConcurrencyHelpers
import Observability
import Settings
import Storage
import Support

/// What `/readyz` needs to know about the daemon: how many gateway connections are up.
public final class PushStatus: Sendable {
    private let connections = NIOLockedValueBox(0)

    public init() {}

    public var connectedCount: Int { connections.withLockedValue { $0 } }

    func connectionOpened() { connections.withLockedValue { $0 += 1 } }
    func connectionClosed() { connections.withLockedValue { $0 -= 1 } }
}

import Logging
import Settings
import Storage

/// One platform's sender for one app, loaded and checked from a configuration (the default app's, or an app's own from
/// the `apps` table): what its connections are made with. ``DestinationRegistry`` loads them; ``SenderLanes`` runs
/// their connections, the same for every destination.
protocol DestinationSource: Sendable {
    /// Whose rows it sends (`push_queue.platform`).
    var platform: Platform { get }

    /// `HTTP/2 to api.push.apple.com:443`, for the start-up lines.
    var description: String { get }

    /// How the default app's rows for this platform are shared among connections: chat and single notifications on
    /// connections of their own, a broadcast's on others (an app from the `apps` table has one lane, ``SenderLane/app``).
    var defaultAppLanes: [SenderLane] { get }

    /// Makes the destination a lane's connections share, runs `body` with it, and releases what it made (FCM's client
    /// for the token URI) once `body` returns. `context` is the lane's (its app, platform and figures).
    func withDestination(context: WorkerContext, logger: Logger, _ body: (any Destination) async -> Void) async
}

/// Every destination the daemon sends to, in one place: each line loads one platform's sender from a configuration,
/// or nil when the configuration does not set that platform up. Adding a destination is a folder (its
/// ``Destination``, its ``DestinationSource``) and one line here.
enum DestinationRegistry {
    static let loaders: [@Sendable (Configuration) throws -> (any DestinationSource)?] = [
        { try PushTransport.load($0) },  // APNs: the binary interface or HTTP/2, always
        { try FCMTransport.load($0) },  // FCM, with `fcm_service_account_file`
        { try WebPushTransport.load($0) },  // browsers, with `webpush_vapid_key_file`
    ]

    /// The senders `configuration` sets up, in the registry's order; a file that cannot be used throws (the daemon
    /// stops at start with exit 78, an app is refused with its reason).
    static func load(_ configuration: Configuration) throws -> [any DestinationSource] {
        try loaders.compactMap { try $0(configuration) }
    }

    /// `HTTP/2 to api.push.apple.com:443, FCM to fcm.googleapis.com:443 (project P)`, for the start-up lines.
    static func describe(_ sources: [any DestinationSource]) -> String {
        sources.map(\.description).joined(separator: ", ")
    }
}

/// A share of one app's rows on one platform and how its connections open.
struct SenderLane: Sendable {
    /// Which rows (chat and single notifications, a broadcast's, or all).
    let traffic: PushQueue.Traffic
    /// The first connection stays open from the start (false: it opens while the lane has rows and closes when idle).
    let firstAlwaysOpen: Bool
    /// The lane's connections have `push.connection` = `NAME-N` (nil: `N`, only when there are several).
    let name: String?
    /// How many connections (`push_connections` for the default app, one for an app of the `apps` table).
    var connections = 1

    /// Chat and single notifications on connections of their own, the first always open: their latency is their own
    /// rows in flight.
    static let interactive = SenderLane(traffic: .interactive, firstAlwaysOpen: true, name: nil)
    /// A broadcast's rows, on connections opened while they wait: a million rows draining never sit before a chat
    /// message in a connection's window.
    static let bulk = SenderLane(traffic: .bulk, firstAlwaysOpen: false, name: "bulk")
    /// An app of the `apps` table: all its rows on one connection, open while it has rows.
    static let app = SenderLane(traffic: .all, firstAlwaysOpen: false, name: nil)

    func with(connections: Int) -> SenderLane {
        var lane = self
        lane.connections = max(1, connections)
        return lane
    }
}

/// Runs the connections of a lane: one ``SenderDriver`` per connection, written once for every destination.
enum SenderLanes {
    /// Runs `lanes` (each its share of `context`'s queue: the app's rows on the source's platform) over one destination
    /// `source` makes (one FCM access token for all of them), until shutdown. Log lines carry `push.platform` (but for
    /// APNs) and `push.connection` (see ``SenderLane/name``).
    static func run(_ source: any DestinationSource, lanes: [SenderLane], context: WorkerContext, logger: Logger) async {
        var logger = logger
        if source.platform != .apns { logger[metadataKey: "push.platform"] = "\(source.platform.rawValue)" }
        await source.withDestination(context: context, logger: logger) { [logger] destination in
            await withTaskGroup(of: Void.self) { group in
                for lane in lanes {
                    let context = context.with(rows: destination.rows(context.rows)).forTraffic(lane.traffic)
                    group.addTask { await run(destination, lane: lane, context: context, logger: logger) }
                }
            }
        }
    }

    /// Over a destination whose extra connections open on demand (``Destination/opensConnectionsOnDemand``), the
    /// first connection is open as the lane says and the others only while the open ones are saturated; otherwise
    /// (the binary interface) they all are, from the start.
    private static func run<D: Destination>(_ destination: D, lane: SenderLane, context: WorkerContext, logger: Logger) async {
        let demand = lane.connections > 1 && destination.opensConnectionsOnDemand ? ConnectionDemand() : nil
        await withTaskGroup(of: Void.self) { group in
            for index in 1...lane.connections {
                var logger = logger
                if let name = lane.name {
                    logger[metadataKey: "push.connection"] = "\(name)-\(index)"
                } else if lane.connections > 1 {
                    logger[metadataKey: "push.connection"] = "\(index)"
                }
                var driver = SenderDriver(context: context, destination: destination, index: index, logger: logger, demand: demand)
                driver.onDemand = index == 1 && !lane.firstAlwaysOpen
                if lane.traffic == .bulk, let threads = context.broadcastThreads {
                    group.addTask { [driver] in await threads.run { await driver.run() } }
                } else {
                    group.addTask { [driver] in await driver.run() }
                }
            }
        }
    }
}

import Foundation
import HTTP2Client
import NIOCore
import NIOPosix
import NIOSSL
import Settings
import Testing

@testable import Push

/// `push_broadcast_nice`: a broadcast's lanes run on threads of their own at a lower priority (``BroadcastThreads``).
@Suite struct BroadcastThreadsTests {
    /// The niceness of the thread this runs on, from /proc (field 19 of its stat line).
    static func currentThreadNice() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        return try #require(Int(fields[16]))
    }

    @Test func aBroadcastLanesTasksRunAtItsNicenessAndOtherTasksDoNot() async throws {
        let threads = BroadcastThreads(nice: 7, threads: 2)
        var inside: [Int] = []
        await threads.run {
            for _ in 0..<20 {
                inside.append((try? Self.currentThreadNice()) ?? -100)
                await Task.yield()
            }
        }
        await threads.shutdown()
        #expect(Set(inside) == [7])
        let outside = try await Task.detached { try Self.currentThreadNice() }.value
        #expect(outside == 0)
    }

    @Test func aConnectionOpenedInsideRunsOnTheBroadcastThreads() async throws {
        // A plain TCP listener: the connection is made (TLS would fail later; only its event loop matters here).
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        let connector = HTTP2Connector(
            endpoint: Endpoint(host: "127.0.0.1", port: port),
            tls: try NIOSSLContext(configuration: .makeClientConfiguration()),
            group: MultiThreadedEventLoopGroup.singleton,
            requestTimeout: .seconds(5)
        )
        let threads = BroadcastThreads(nice: 5, threads: 1)
        var inside: (any Channel)?
        await threads.run { inside = try? await connector.connect().0 }
        let outside = try await connector.connect().0
        let insideChannel = try #require(inside)
        #expect(insideChannel.eventLoop === threads.group.next())
        #expect(outside.eventLoop !== threads.group.next())
        try? await insideChannel.close()
        try? await outside.close()
        try await server.close()
        await threads.shutdown()
    }
}

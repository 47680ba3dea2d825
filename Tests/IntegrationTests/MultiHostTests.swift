import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import API
@testable import Settings
@testable import Storage
@testable import Support

/// libpq's multi-host URLs against two real clusters of the test's own: A answers read-only (its database has
/// `default_transaction_read_only`, what libpq's `read-write` check sees on a standby), B is writable. The session goes
/// to the first host that is what `target_session_attrs` asks; when that host goes and another becomes what the URL
/// asks (a standby promoted), the API follows by itself.
@Suite struct MultiHostTests {
    static func readOnly(_ cluster: ScratchCluster, _ on: Bool) async throws {
        try await TestDatabase.admin(try cluster.url(), "ALTER DATABASE pushchat SET default_transaction_read_only = \(on ? "on" : "off")")
    }

    static func url(_ hosts: [Int], _ query: String) throws -> DatabaseURL {
        try DatabaseURL(parsing: "postgres://postgres@" + hosts.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/pushchat?" + query)
    }

    /// The port of the server a connection to `url` reaches.
    static func port(_ url: DatabaseURL) async throws -> Int {
        try await Database.withConnection(url: url, applicationName: "multi-host-test", logger: TestDatabase.logger) { connection in
            for try await port in try await connection.query("SELECT inet_server_port()", logger: TestDatabase.logger).decode(Int32.self) {
                return Int(port)
            }
            return 0
        }
    }

    @Test func aSessionGoesToTheFirstHostThatIsWhatTheURLAsks() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(a, true)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=read-write")) == b.port)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=read-only")) == a.port)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=any")) == a.port)
                #expect(try await Self.port(Self.url([b.port, a.port], "target_session_attrs=read-only")) == a.port)
                // Neither is in recovery: both are primaries, the first wins; no standby, so prefer-standby takes any.
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=primary")) == a.port)
                #expect(try await Self.port(Self.url([b.port, a.port], "target_session_attrs=prefer-standby")) == b.port)
                // A host that does not answer is passed over.
                let dead = try FreePort.loopback()
                #expect(try await Self.port(Self.url([dead, b.port], "connect_timeout=2")) == b.port)
                // None fits: one error naming what each host was.
                let error = await #expect(throws: DatabaseError.self) {
                    try await Self.port(Self.url([dead, a.port], "target_session_attrs=read-write"))
                }
                #expect(error?.code == .unavailable)
                #expect(error?.reason.contains("127.0.0.1:\(a.port): not read-write") == true, "\(String(describing: error))")
                #expect(error?.reason.contains("127.0.0.1:\(dead):") == true, "\(String(describing: error))")
            }
        }
    }

    /// The writable host is lost and the other becomes writable (a promotion): the API answers 503 meanwhile and 200
    /// again within 10 s of the promotion, with no restart, writing to the new host.
    @Test func theAPIFollowsAPromotion() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(a, true)
                let url = try Self.url([a.port, b.port], "target_session_attrs=read-write&connect_timeout=2")
                let configuration = APIHarness.configuration(url: url, mode: .production)
                try await APIHarness.run(configuration: configuration) { api in
                    #expect(try await DatabaseOutageTests.join(api, 1).status == .ok)
                    try b.stop()
                    #expect(try await DatabaseOutageTests.join(api, 2).status == .serviceUnavailable, "A is not writable yet")
                    try await Self.readOnly(a, false)
                    let promoted = ContinuousClock.now
                    var status = HTTPResponse.Status.serviceUnavailable
                    while status != .ok && promoted.duration(to: .now) < .seconds(15) {
                        status = try await DatabaseOutageTests.join(api, 3).status
                        if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
                    }
                    let elapsed = promoted.duration(to: .now)
                    #expect(status == .ok && elapsed < .seconds(10), "200 again \(elapsed) after the promotion")
                    #expect(try await api.get("/readyz").status == .ok)
                }
                let rows = try await TestDatabase.scalar(
                    try a.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users WHERE udid = \(Device.udid(3))",
                    as: Int64.self
                )
                #expect(rows == 1, "the join after the promotion is on A")
            }
        }
    }
}

import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import API
@testable import APIServer
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// The API's abuse limits under concurrent load.
@Suite struct APILimitTests {
    static func run(_ limits: APILimits, _ body: @escaping @Sendable (APIHarness) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url))
            configuration.limits = limits
            try await APIHarness.run(configuration: configuration, ownerURL: url, body)
        }
    }

    @Test func aBurstFromOneAddressIsCutAtTheBurstSize() async throws {
        var limits = APILimits.unlimited
        limits.ratePerIP = 0.05  // one token per 20 s: nothing refills during the test, however loaded the machine
        limits.burstPerIP = 10
        try await Self.run(limits) { api in
            let results = try await withThrowingTaskGroup(of: (status: Int, retryAfter: String?).self) { group in
                for n in 1...40 {
                    group.addTask { try await api.postAlone("cmd=join&udid=\(Device.udid(n))&token=0&name=n\(n)&code=room") }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let accepted = results.filter { $0.status == 200 }.count
            let refused = results.filter { $0.status == 429 }
            #expect(accepted == 10, "the burst of 10")
            #expect(refused.count == 40 - accepted)
            #expect(refused.allSatisfy { Int($0.retryAfter ?? "") ?? 0 >= 1 })
            #expect(try await api.count("active_users") == Int64(accepted), "refused requests write nothing")
        }
    }

    /// A backend with a valid key sends everything from its one address: its key's limits govern it, not the
    /// per-address limiter (300 registrations in a row were ~260 times 429 at the default 20/s). Made-up keys from the
    /// same address meanwhile still stop at their own bucket.
    @Test func aValidKeyIsNotThrottledByItsAddress() async throws {
        var limits = APILimits.unlimited
        limits.ratePerIP = 0.05  // nothing refills during the test
        limits.burstPerIP = 40
        try await Self.run(limits) { api in
            let key = try await ProviderAPITests.createKey(api.url, requests: 6_000)
            var statuses: [Int: Int] = [:]
            for n in 1...300 {
                let answer = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/devices",
                    key: key,
                    #"{"token": "\#(String(format: "%064x", n))"}"#
                )
                statuses[answer.status, default: 0] += 1
            }
            #expect(statuses[429] == nil && (statuses[201] ?? 0) + (statuses[200] ?? 0) == 300, "\(statuses)")
            var madeUp: [Int] = []
            for n in 1...15 {
                madeUp.append(try await ProviderAPITests.call(api, .get, "/v1/devices?user=a", key: "made-up-\(n)").status)
            }
            #expect(madeUp.prefix(10).filter { $0 == 401 }.count == 10, "the address's own bucket is untouched by the valid key: \(madeUp)")
            #expect(madeUp.suffix(4).allSatisfy { $0 == 429 }, "\(madeUp)")
            let still = try await ProviderAPITests.call(api, .get, "/v1/devices?user=a", key: key)
            #expect(still.status == 200, "the valid key keeps working while its address is refused for made-up keys")
        }
    }

    /// Made-up provider keys and health checks pass the per-address limiter too, and failed authentications a
    /// stricter bucket of their own (a quarter of the address's): past it they get 429 before any key lookup.
    @Test func madeUpKeysAndHealthChecksAreLimitedPerAddress() async throws {
        var limits = APILimits.unlimited
        limits.ratePerIP = 1
        limits.burstPerIP = 10
        try await Self.run(limits) { api in
            var statuses: [Int] = []
            for n in 1...15 {
                let answer = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: "made-up-\(n)",
                    #"{"to": {"all": true}, "aps": {"alert": "x"}}"#
                )
                statuses.append(answer.status)
            }
            #expect(statuses.filter { $0 == 401 }.count >= 2 && statuses.filter { $0 == 401 }.count <= 4, "\(statuses)")
            #expect(statuses.suffix(10).allSatisfy { $0 == 429 }, "\(statuses)")
            #expect(try await api.get("/readyz").status == .tooManyRequests)
            #expect(try await api.get("/healthz").status == .tooManyRequests)
        }
    }

    @Test func oneDeviceIsLimitedOnItsOwn() async throws {
        var limits = APILimits.unlimited
        limits.ratePerUDID = 0.05  // one token per 20 s: nothing refills during the test, however loaded the machine
        limits.burstPerUDID = 2
        try await Self.run(limits) { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "Bob", "code": "room"])
            var statuses: [Int] = []
            for _ in 0..<4 {
                statuses.append(Int(try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "spam"]).status.code))
            }
            #expect(statuses == [200, 429, 429, 429], "join took one of Ann's two tokens")
            let other = try await api.post(["cmd": "message", "udid": Device.udid(2), "text": "hello"])
            #expect(other.status == .ok, "another device is not affected")
            #expect(try await api.count("push_queue") == 2)
        }
    }

    @Test func aFullRoomRefusesNewMembers() async throws {
        var limits = APILimits.unlimited
        limits.maxRoomSize = 2
        try await Self.run(limits) { api in
            for n in 1...2 {
                let response = try await api.post(["cmd": "join", "udid": Device.udid(n), "token": "0", "name": "n\(n)", "code": "small"])
                #expect(response.status == .ok)
            }
            let third = try await api.post(["cmd": "join", "udid": Device.udid(3), "token": "0", "name": "n3", "code": "small"])
            #expect(third.status == .forbidden)
            #expect(third.errorDescription == "Room is full")
            let again = try await api.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "n2", "code": "small"])
            #expect(again.status == .ok, "a member joining again is not a new member")
            let elsewhere = try await api.post(["cmd": "join", "udid": Device.udid(3), "token": "0", "name": "n3", "code": "other"])
            #expect(elsewhere.status == .ok)
            #expect(try await api.count("active_users") == 3)
        }
    }

    /// The race itself, laid out: one join's transaction is open (its row not yet committed) when a second join to
    /// the same room of one runs. The second counted the room without the first's row and got in too; now it waits
    /// for the first to commit, and is refused.
    @Test func aJoinWaitsForAnotherJoinToTheSameRoomToCommit() async throws {
        try await TestDatabase.withFreshDatabase { url in
            @Sendable func join(_ n: Int, on connection: PostgresConnection) async throws -> Int {
                let statement = ChatStatements.Join(
                    udid: Device.udid(n),
                    token: "0",
                    name: "n\(n)",
                    code: "pair",
                    platform: .apns,
                    ipAddress: nil,
                    maxRoomSize: 1
                )
                var rows = 0
                for try await _ in try await connection.execute(statement, logger: TestDatabase.logger) { rows += 1 }
                return rows
            }
            try await TestDatabase.withConnection(url) { first in
                try await first.query("BEGIN", logger: TestDatabase.logger)
                #expect(try await join(1, on: first) == 1)
                let second = Task {
                    try await TestDatabase.withConnection(url) { connection in
                        try await join(2, on: connection)
                    }
                }
                try await Task.sleep(for: .milliseconds(500))
                try await first.query("COMMIT", logger: TestDatabase.logger)
                #expect(try await second.value == 0, "the room of one is full once the first join commits")
            }
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM active_users", as: Int64.self) == 1)
        }
    }

    /// Joins at the same moment each counted the room before the others had committed, and all got in. Now they
    /// wait for each other per room: 30 joins at once into a room of 5 leave exactly 5 members.
    @Test func joinsAtTheSameMomentDoNotOverfillARoom() async throws {
        var limits = APILimits.unlimited
        limits.maxRoomSize = 5
        try await Self.run(limits) { api in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 1...30 {
                    group.addTask { try await api.postAlone("cmd=join&udid=\(Device.udid(n))&token=0&name=n\(n)&code=crowded").status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 5, "\(statuses)")
            #expect(statuses.filter { $0 == 403 }.count == 25)
            #expect(try await api.count("active_users") == 5)
        }
    }
}

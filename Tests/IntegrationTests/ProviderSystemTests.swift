import Foundation
import NIOCore
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Storage
@testable import Support

/// The provider API end to end, as deployed: `pushchat-api keys create`, then backend code registering devices and
/// sending notifications over HTTP, the push daemon delivering them to the simulator over HTTP/2 and over the binary
/// interface, the status counting what happened, `keys revoke`, and the feedback job pruning a registered device.
@Suite(.serialized) struct ProviderSystemTests {
    static func token(_ byte: Int) -> String { String(repeating: String(format: "%02x", byte), count: 32) }

    /// One HTTP/1.1 request on its own connection; the status, the body parsed as JSON, and the raw answer.
    static func call(
        port: Int,
        _ method: String,
        _ path: String,
        key: String?,
        _ body: String = ""
    ) async throws -> (status: Int, json: [String: Any], raw: String) {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        if let key { head += "Authorization: Bearer \(key)\r\n" }
        if !body.isEmpty { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        let raw = String(buffer: try await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: head + "\r\n" + body)))
        let status = Int(raw.split(separator: " ").dropFirst().first ?? "") ?? 0
        let content = raw.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        let json = (try? JSONSerialization.jsonObject(with: Data(content.utf8))) as? [String: Any] ?? [:]
        return (status, json, raw)
    }

    /// `pushchat-api keys create NAME MODE`: the key is the last line of standard output.
    static func createKey(_ name: String, mode: String, environment: [String: String], _ options: [String] = []) throws -> String {
        let created = try Executable(name: "pushchat-api").run(["keys", "create", name, mode] + options, environment: environment)
        #expect(created.status == 0, "\(created.standardError)")
        let key = created.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(key.hasPrefix(APIKey.prefix) && key.count == 47, "\(created.standardOutput)")
        return key
    }

    /// Server Density's alert: an alert dictionary, a badge, a sound and their own dictionary beside aps.
    static let serverDensity =
        #"{"to": {"users": ["ops"]}, "aps": {"alert": {"title": "web1", "body": "CPU > 90% for 5 min"}, "badge": 4, "sound": "alert.caf"}, "data": {"server": {"serverId": 1, "name": "web1"}}}"#
    static let serverDensityPayload =
        #"{"aps":{"alert":{"title":"web1","body":"CPU > 90% for 5 min"},"badge":4,"sound":"alert.caf"},"server":{"serverId":1,"name":"web1"}}"#

    /// What every transport must do: run against processes started by `start` with `environment`; the records land in
    /// `directory`.
    static func exercise(
        api: Int,
        directory: String,
        url: DatabaseURL,
        mode: String,
        environment: [String: String],
        payloadLimit: Int
    ) async throws {
        let scopes = ["--scope", "send", "--scope", "broadcast", "--scope", "devices:write", "--scope", "status", "--unlimited"]
        let key = try createKey("alerting", mode: mode, environment: environment, scopes)
        _ = try createKey("plain", mode: mode, environment: environment)
        let listed = try Executable(name: "pushchat-api").run(["keys", "list", mode], environment: environment)
        #expect(
            listed.standardOutput.contains("alerting\tdefault\t0\t0\tsend,broadcast,devices:write,status\t"),
            "\(listed.standardOutput)"
        )
        #expect(
            listed.standardOutput.contains("plain\tdefault\t6000\t100000\tsend,devices:write,status\t"),
            "finite limits, no broadcast by default"
        )
        let unknown = try Executable(name: "pushchat-api").run(["keys", "create", "x", mode, "--scope", "admin"], environment: environment)
        #expect(unknown.status != 0 && unknown.standardError.contains("--scope admin"), "\(unknown.standardError)")
        #expect(!listed.standardOutput.contains(key), "the key is shown once, at creation")
        let duplicate = try Executable(name: "pushchat-api").run(["keys", "create", "alerting", mode], environment: environment)
        #expect(duplicate.status == 1)
        #expect(duplicate.standardError.contains("a key named alerting exists"))

        // Devices: two of the ops user's, one other, one Apple calls unregistered; two chat users in a room.
        for (token, user) in [(1, "ops"), (2, "ops"), (3, "dev"), (0xee, "gone")] {
            let registered = try await call(
                port: api,
                "POST",
                "/v1/devices",
                key: key,
                #"{"token": "\#(Self.token(token))", "user": "\#(user)", "client_info": "test"}"#
            )
            #expect(registered.status == 201, "\(registered.raw)")
        }
        for (udid, token) in [("1", 5), ("2", 6)] {
            let form = "cmd=join&udid=\(String(repeating: udid, count: 40))&token=\(Self.token(token))&name=U\(udid)&code=room1"
            #expect(try await SystemTests.post(port: api, form).hasPrefix("HTTP/1.1 200"))
        }

        let alert = try await call(port: api, "POST", "/v1/notifications", key: key, Self.serverDensity)
        #expect(alert.status == 202, "\(alert.raw)")
        #expect(alert.json["recipients"] as? Int == 2)
        let alertID = try #require(alert.json["id"] as? String)
        let arrived = try await SystemTests.arrived(in: directory, count: 2)
        #expect(arrived.count == 2)
        #expect(Set(arrived.compactMap { $0["token"] as? String }) == [Self.token(1), Self.token(2)])
        for notification in arrived {
            #expect(notification["payload"] as? String == Self.serverDensityPayload, "byte for byte")
            #expect(notification["priority"] as? Int == 10)
        }

        let silent = try await call(
            port: api,
            "POST",
            "/v1/notifications",
            key: key,
            #"{"to": {"tokens": ["\#(Self.token(3))"]}, "aps": {"content-available": 1}, "data": {"sync": "inbox"}}"#
        )
        #expect(silent.status == 202)
        let quiet = try #require(try await SystemTests.arrived(in: directory, count: 3).last)
        #expect(quiet["payload"] as? String == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
        #expect(quiet["priority"] as? Int == 5)
        let format = try #require(quiet["format"] as? String, "the record says which interface it came by")
        if format == "http2" {
            #expect(quiet["push_type"] as? String == "background")
        } else {
            #expect(format == "frame", "the binary interface's frame has no push type")
        }

        let room = try await call(
            port: api,
            "POST",
            "/v1/notifications",
            key: key,
            #"{"to": {"room": "room1"}, "aps": {"alert": "to the room"}}"#
        )
        #expect(room.json["recipients"] as? Int == 2)
        let all = try await call(port: api, "POST", "/v1/notifications", key: key, #"{"to": {"all": true}, "aps": {"alert": "everyone"}}"#)
        #expect(all.json["recipients"] as? Int == 6)
        let allID = try #require(all.json["id"] as? String)
        let everything = try await SystemTests.arrived(in: directory, count: 3 + 2 + 5)
        let toEveryone = everything.filter { ($0["payload"] as? String)?.contains("everyone") == true }.compactMap {
            $0["token"] as? String
        }
        #expect(Set(toEveryone) == Set([1, 2, 3, 5, 6].map(Self.token)), "each token once; the unregistered one fails")
        #expect(toEveryone.count == 5)

        // Status after delivery: everything sent but the unregistered device, which failed with Apple's reason.
        try await SystemTests.eventually {
            let status = try await call(port: api, "GET", "/v1/notifications/\(allID)", key: key)
            return status.json["pending"] as? Int == 0
        }
        let status = try await call(port: api, "GET", "/v1/notifications/\(allID)", key: key)
        #expect(status.json["recipients"] as? Int == 6)
        #expect(status.json["sent"] as? Int == 5)
        #expect(status.json["failed"] as? Int == 1)
        let failures = try #require(status.json["failures"] as? [[String: Any]])
        #expect(failures.first?["token"] == nil, "the broadcast named no token, and the key has no devices:read: \(failures)")
        #expect((failures.first?["reason"] as? String)?.isEmpty == false, "\(failures)")
        let alertStatus = try await call(port: api, "GET", "/v1/notifications/\(alertID)", key: key)
        #expect(alertStatus.json["sent"] as? Int == 2)

        // Over the interface's limit: refused, nothing queued.
        let rows = try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries", as: Int64.self)
        let oversized = try await call(
            port: api,
            "POST",
            "/v1/notifications",
            key: key,
            #"{"to": {"users": ["ops"]}, "aps": {"alert": "\#(String(repeating: "x", count: payloadLimit - 19))"}}"#
        )
        #expect(oversized.status == 413, "\(oversized.raw.prefix(300))")
        #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries", as: Int64.self) == rows)

        // Unregister: the device gets nothing more.
        #expect(try await call(port: api, "DELETE", "/v1/devices/\(Self.token(2))", key: key).status == 204)
        let after = try await call(port: api, "POST", "/v1/notifications", key: key, #"{"to": {"users": ["ops"]}, "aps": {"badge": 1}}"#)
        #expect(after.json["recipients"] as? Int == 1)

        // The feedback job prunes the registered device Apple called gone (it registered before the report): HTTP/2's
        // 410 or the feedback service's tuple.
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query(
                "UPDATE devices SET updated_at = now() - interval '1 day' WHERE device_token = \(Self.token(0xee))",
                logger: TestDatabase.logger
            )
        }
        // (One device of five with a token: at least one stale token may always go, whatever feedback_max_prune.)
        let feedback = try Executable(name: "pushchat-feedback").run([mode], environment: environment)
        #expect(feedback.status == 0, "\(feedback.standardOutput) \(feedback.standardError)")
        #expect(
            try await TestDatabase.scalar(url, "SELECT count(*) FROM devices WHERE device_token = \(Self.token(0xee))", as: Int64.self)
                == 0,
            "\(feedback.standardOutput) \(feedback.standardError)"
        )
        #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM devices", as: Int64.self) == 2)

        // Revoked: 401 from then on.
        let revoked = try Executable(name: "pushchat-api").run(["keys", "revoke", "alerting", mode], environment: environment)
        #expect(revoked.status == 0, "\(revoked.standardError)")
        #expect(try await call(port: api, "GET", "/v1/devices?user=ops", key: key).status == 401)
        let again = try Executable(name: "pushchat-api").run(["keys", "revoke", "alerting", mode], environment: environment)
        #expect(again.status == 1)
    }

    @Test func overHTTP2() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let directory = try SystemTests.workDirectory()
            try Self.token(0xee).write(toFile: directory + "/unregistered.txt", atomically: true, encoding: .utf8)
            let (http2, api, unused) = (try SystemTests.freePort(), try SystemTests.freePort(), try SystemTests.freePort())
            let environment = SystemTests.http2Environment(url: url, api: api, http2: http2, unused: unused)
            let processes = try await SystemTests.startOverHTTP2(in: directory, environment: environment, http2: http2, api: api)
            defer { processes.stop() }
            try await Self.exercise(
                api: api,
                directory: directory,
                url: url,
                mode: "production",
                environment: environment,
                payloadLimit: 4097
            )
        }
    }

    @Test func overTheBinaryInterface() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let directory = try SystemTests.workDirectory()
            try Self.token(0xee).write(toFile: directory + "/unregistered.txt", atomically: true, encoding: .utf8)
            // On this interface status 8 fails the notification and deletes nobody; the feedback service reports it.
            try "\(Self.token(0xee)) \(Int(Date().timeIntervalSince1970))\n".write(
                toFile: directory + "/feedback.txt",
                atomically: true,
                encoding: .utf8
            )
            let (gateway, feedback, api) = (try SystemTests.freePort(), try SystemTests.freePort(), try SystemTests.freePort())
            let environment = SystemTests.binaryEnvironment(url: url, api: api, gateway: gateway, feedback: feedback)
            let processes = try await SystemTests.start(
                in: directory,
                simulator: [
                    "--gateway-port", "\(gateway)", "--feedback-port", "\(feedback)", "--http2-port", "0",
                    "--unregistered", directory + "/unregistered.txt",
                    "--feedback", directory + "/feedback.txt",
                ],
                mode: "development",
                environment: environment,
                api: api
            )
            defer { processes.stop() }
            try await Self.exercise(
                api: api,
                directory: directory,
                url: url,
                mode: "development",
                environment: environment,
                payloadLimit: 2049
            )
        }
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOFoundationCompat
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Storage
@testable import Support

/// The provider API (`/v1`) of the real API server against PostgreSQL: keys, the device registry, notifications to
/// every kind of target, idempotency, limits, and every refusal writing nothing.
@Suite struct ProviderAPITests {
    static func token(_ byte: Int) -> String { String(repeating: String(format: "%02x", byte), count: 32) }

    /// A key stored as `keys create` stores it; the key itself.
    static func createKey(
        _ url: DatabaseURL,
        name: String = "backend",
        requests: Int = 0,
        recipients: Int = 0,
        scopes: Set<KeyScope> = Set(KeyScope.allCases),
        app: String = App.defaultName
    ) async throws -> String {
        let key = APIKey.generate()
        let created = try await TestDatabase.withConnection(url) { connection in
            try await KeyAdmin(connection: connection, logger: TestDatabase.logger).create(
                name: name,
                hash: APIKey.hash(key),
                requestsPerMinute: requests,
                recipientsPerMinute: recipients,
                scopes: scopes,
                app: app
            )
        }
        #expect(created)
        return key
    }

    static func headers(_ key: String?, _ extra: HTTPFields = [:]) -> HTTPFields {
        var headers = extra
        if headers[.contentType] == nil { headers[.contentType] = "application/json" }
        if let key { headers[.authorization] = "Bearer \(key)" }
        return headers
    }

    static func call(
        _ api: APIHarness,
        _ method: HTTPRequest.Method,
        _ path: String,
        key: String?,
        _ body: String? = nil,
        headers extra: HTTPFields = [:]
    ) async throws -> (status: Int, json: [String: Any], headers: HTTPFields) {
        let response = try await api.client.executeRequest(
            uri: path,
            method: method,
            headers: headers(key, extra),
            body: body.map { ByteBuffer(string: $0) }
        )
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: response.body))) as? [String: Any] ?? [:]
        return (Int(response.status.code), json, response.headers)
    }

    /// Every row of the provider's tables and the queue, to prove a request wrote nothing.
    static func snapshot(_ api: APIHarness) async throws -> String {
        try await TestDatabase.scalar(
            api.url,
            """
            SELECT concat_ws('|',
                (SELECT coalesce(md5(string_agg(q::text, ',' ORDER BY message_id)), '-') FROM push_deliveries q),
                (SELECT coalesce(md5(string_agg(n::text, ',' ORDER BY id)), '-') FROM notifications n),
                (SELECT coalesce(md5(string_agg(d::text, ',' ORDER BY device_token)), '-') FROM devices d),
                (SELECT coalesce(md5(string_agg(i::text, ',' ORDER BY idempotency_key)), '-') FROM idempotency_keys i))
            """,
            as: String.self
        )
    }

    @Test func aMissingUnknownOrRevokedKeyGets401() async throws {
        try await APIHarness.run { api in
            let key = try await Self.createKey(api.url)
            let body = #"{"token": "\#(Self.token(1))"}"#
            #expect(try await Self.call(api, .post, "/v1/devices", key: nil, body).status == 401)
            #expect(try await Self.call(api, .post, "/v1/devices", key: "pck_unknown", body).status == 401)
            let malformed = try await api.client.executeRequest(
                uri: "/v1/devices",
                method: .post,
                headers: [.authorization: "Basic abc", .contentType: "application/json"],
                body: ByteBuffer(string: body)
            )
            #expect(malformed.status == .unauthorized)
            #expect(malformed.headers[.wwwAuthenticate] == #"Bearer realm="pushchat""#)
            #expect(try await api.count("devices") == 0)
            #expect(try await Self.call(api, .post, "/v1/devices", key: key, body).status == 201)
            let revokedNow = try await TestDatabase.withConnection(api.url) { connection in
                try await KeyAdmin(connection: connection, logger: TestDatabase.logger).revoke(name: "backend")
            }
            #expect(revokedNow)
            let revoked = try await Self.call(api, .get, "/v1/devices?user=x", key: key)
            #expect(revoked.status == 401)
            #expect(revoked.json["reason"] as? String == "unknown or revoked API key")
        }
    }

    @Test func devicesRegisterUpdateListAndUnregister() async throws {
        try await APIHarness.run { api in
            let key = try await Self.createKey(api.url)
            let upper = Self.token(0xab).uppercased()
            let created = try await Self.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"token": "\#(upper)", "user": "alice", "client_info": "iPhone15,2 iOS 17.1"}"#
            )
            #expect(created.status == 201)
            #expect(created.json["token"] as? String == Self.token(0xab))
            #expect(created.json["client_info"] as? String == "iPhone15,2 iOS 17.1")
            let again = try await Self.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"token": "\#(Self.token(0xab))", "user": "alice", "client_info": "v2"}"#
            )
            #expect(again.status == 200, "registering again updates")
            #expect(again.json["client_info"] as? String == "v2")
            #expect(
                try await Self.call(api, .post, "/v1/devices", key: key, #"{"token": "\#(Self.token(0xcd))", "user": "alice"}"#).status
                    == 201
            )
            #expect(try await Self.call(api, .post, "/v1/devices", key: key, #"{"token": "\#(Self.token(0xef))"}"#).status == 201)
            let listed = try await Self.call(api, .get, "/v1/devices?user=alice", key: key)
            #expect(listed.status == 200)
            let devices = try #require(listed.json["devices"] as? [[String: Any]])
            #expect(Set(devices.compactMap { $0["token"] as? String }) == [Self.token(0xab), Self.token(0xcd)])
            #expect(devices.allSatisfy { $0.keys.contains("last_badge") && $0["user"] as? String == "alice" })
            #expect(try await Self.call(api, .get, "/v1/devices", key: key).status == 400)
            #expect(try await Self.call(api, .delete, "/v1/devices/\(Self.token(0xcd))", key: key).status == 204)
            let gone = try await Self.call(api, .delete, "/v1/devices/\(Self.token(0xcd))", key: key)
            #expect(gone.status == 404)
            #expect(gone.json["field"] as? String == "token")
            #expect(try await Self.call(api, .delete, "/v1/devices/nothex", key: key).status == 400)
            #expect(try await api.count("devices") == 2)
            // Bad registrations write nothing.
            let before = try await Self.snapshot(api)
            for body in [#"{"token": "12"}"#, #"{"user": "a"}"#, "not json", #"{"token": "\#(Self.token(1))", "x": 1}"#] {
                let refused = try await Self.call(api, .post, "/v1/devices", key: key, body)
                #expect(refused.status == 400, "\(body)")
                #expect(refused.json["reason"] is String, "\(body)")
            }
            #expect(try await Self.snapshot(api) == before)
        }
    }

    /// The API as configured with the app's bundle id (`apns_topic`), which a request's `topic` is checked against.
    static func runWithTopic(_ body: @escaping @Sendable (APIHarness) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url))
            configuration.apns.topic = "com.example.PushChat"
            try await APIHarness.run(configuration: configuration, ownerURL: url, body)
        }
    }

    @Test func notificationsReachEveryKindOfTargetEachTokenOnce() async throws {
        try await Self.runWithTopic { api in
            let key = try await Self.createKey(api.url)
            for (token, user) in [(1, "alice"), (2, "alice"), (3, "bob")] {
                _ = try await Self.call(api, .post, "/v1/devices", key: key, #"{"token": "\#(Self.token(token))", "user": "\#(user)"}"#)
            }
            // Chat users: one shares a token with a registered device.
            for (udid, token, code) in [("1", 3, "demo"), ("2", 4, "demo"), ("3", 5, "other")] {
                try await api.post([
                    "cmd": "join", "udid": String(repeating: udid, count: 40), "token": Self.token(token), "name": "N\(udid)", "code": code,
                ])
            }
            func send(_ to: String) async throws -> (status: Int, json: [String: Any], headers: HTTPFields) {
                try await Self.call(api, .post, "/v1/notifications", key: key, #"{"to": \#(to), "aps": {"alert": "hi"}}"#)
            }
            let users = try await send(#"{"users": ["alice"]}"#)
            #expect(users.status == 202)
            #expect(users.json["recipients"] as? Int == 2)
            let id = try #require(users.json["id"] as? String)
            #expect(UUID(uuidString: id) != nil)
            #expect(users.headers[.location] == "/v1/notifications/\(id)")
            #expect(try await send(#"{"tokens": ["\#(Self.token(9))"]}"#).json["recipients"] as? Int == 1)
            #expect(try await send(#"{"udids": ["\#(String(repeating: "2", count: 40))"]}"#).json["recipients"] as? Int == 1)
            #expect(try await send(#"{"room": "demo"}"#).json["recipients"] as? Int == 2)
            #expect(try await send(#"{"room": "nobody"}"#).json["recipients"] as? Int == 0)
            #expect(try await send(#"{"all": true}"#).json["recipients"] as? Int == 5, "tokens 1–5, token 3 once")
            let rows = try await TestDatabase.scalar(
                api.url,
                "SELECT string_agg(DISTINCT payload, ',') || ' ' || count(*) FROM push_deliveries WHERE notification_id IS NOT NULL",
                as: String.self
            )
            #expect(rows == #"{"aps":{"alert":"hi"}} 11"#)
            let status = try await Self.call(api, .get, "/v1/notifications/\(id)", key: key)
            #expect(status.status == 200)
            #expect(status.json["recipients"] as? Int == 2)
            #expect(status.json["pending"] as? Int == 2)
            #expect(status.json["sent"] as? Int == 0)
            #expect((status.json["failures"] as? [Any])?.isEmpty == true)
            #expect(try await Self.call(api, .get, "/v1/notifications/\(UUID().uuidString)", key: key).status == 404)
            #expect(try await Self.call(api, .get, "/v1/notifications/nope", key: key).status == 404)
            // The row carries the HTTP/2 options the daemon sends.
            let options = try await Self.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                #"{"to": {"tokens": ["\#(Self.token(7))"]}, "aps": {"content-available": 1}, "expiration": 0, "collapse_id": "sync", "topic": "com.example.PushChat"}"#
            )
            #expect(options.status == 202)
            let row = try await TestDatabase.scalar(
                api.url,
                """
                SELECT concat_ws(' ', push_type, priority, extract(epoch FROM expiration)::int8, collapse_id, topic)
                FROM push_deliveries WHERE device_token = \(Self.token(7))
                """,
                as: String.self
            )
            #expect(row == "background 5 0 sync com.example.PushChat")
        }
    }

    @Test func everyRefusalQueuesNothing() async throws {
        try await APIHarness.run { api in
            let key = try await Self.createKey(api.url)
            _ = try await Self.call(api, .post, "/v1/devices", key: key, #"{"token": "\#(Self.token(1))", "user": "alice"}"#)
            let android = "dGhpcyBpcyBh:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_" + String(repeating: "Q", count: 100)
            let registered = try await Self.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"token": "\#(android)", "platform": "fcm", "user": "bob"}"#
            )
            #expect(registered.status == 201 || registered.status == 200, "\(registered.json)")
            let before = try await Self.snapshot(api)
            let token = Self.token(1)
            let big = String(repeating: "x", count: 4100)
            // FCM's 4,096 bytes for the whole message: one request copied an unbounded android.notification into every
            // Android recipient's row (a megabyte each).
            let hugeAndroid =
                #"{"to": {"users": ["alice", "bob"]}, "aps": {"alert": "x"}, "android": {"notification": {"body": "\#(String(repeating: "z", count: 600_000))"}}}"#
            for (body, status, field) in [
                ("{not json", 400, nil),
                (#"{"aps": {"alert": "x"}}"#, 400, "to"),
                (#"{"to": {"users": ["alice"], "all": true}, "aps": {"alert": "x"}}"#, 400, "to"),
                (#"{"to": {"tokens": ["123"]}, "aps": {"alert": "x"}}"#, 400, "to.tokens[0]"),
                (#"{"to": {"users": ["alice"]}, "aps": []}"#, 400, "aps"),
                (#"{"to": {"users": ["alice"]}, "aps": {"alert": "x"}, "data": {"aps": {}}}"#, 400, "data.aps"),
                (#"{"to": {"users": ["alice"]}, "aps": {"badge": -2}}"#, 400, "aps.badge"),
                (#"{"to": {"users": ["alice"]}, "aps": {"badge": 2.5}}"#, 400, "aps.badge"),
                (#"{"to": {"users": ["alice"]}, "aps": {"alert": "x"}, "priority": 3}"#, 400, "priority"),
                (#"{"to": {"tokens": ["\#(token)"]}, "aps": {"alert": "\#(big)"}}"#, 413, "aps"),
                (hugeAndroid, 400, "android.notification"),
                // No bundle id known to this API (no apns_topic): a topic could name any app of the team.
                (#"{"to": {"users": ["alice"]}, "aps": {"alert": "x"}, "topic": "com.example.PushChat"}"#, 400, "topic"),
            ] {
                let refused = try await Self.call(api, .post, "/v1/notifications", key: key, body)
                #expect(refused.status == status, "\(body.prefix(80)): \(refused.json)")
                #expect(refused.json["field"] as? String == field, "\(body.prefix(80)): \(refused.json)")
                #expect((refused.json["reason"] as? String)?.isEmpty == false)
            }
            let wrongType = try await Self.call(api, .post, "/v1/notifications", key: key, "{}", headers: [.contentType: "text/plain"])
            #expect(wrongType.status == 415)
            let tooLarge = try await api.client.executeRequest(
                uri: "/v1/notifications",
                method: .post,
                headers: Self.headers(key),
                body: ByteBuffer(string: #"{"x": ""# + String(repeating: "y", count: (1 << 20) + 10) + #""}"#)
            )
            #expect(tooLarge.status == .contentTooLarge)
            #expect(try await Self.snapshot(api) == before)
            // The database's last line (migration 020), whatever writes: no payload larger than any push service takes.
            for table in ["push_queue", "push_history"] {
                let refused = await #expect(throws: (any Error).self) {
                    try await TestDatabase.withConnection(api.url) { connection in
                        try await connection.query(
                            PostgresQuery(
                                unsafeSQL: """
                                    INSERT INTO \(table) (message_id, device_token, payload, time_sent)
                                    VALUES (999999999, '\(token)', repeat('x', 5121), now())
                                    """
                            ),
                            logger: TestDatabase.logger
                        )
                    }
                }
                #expect(String(reflecting: refused).contains("payload_size"), "\(table): \(String(reflecting: refused))")
            }
        }
    }

    @Test func anIdempotencyKeyAnswersTheFirstAnswerAndQueuesNothing() async throws {
        try await APIHarness.run { api in
            let key = try await Self.createKey(api.url)
            let other = try await Self.createKey(api.url, name: "other")
            let body = #"{"to": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))"]}, "aps": {"alert": "once"}}"#
            let headers: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "order-42"]
            let first = try await Self.call(api, .post, "/v1/notifications", key: key, body, headers: headers)
            #expect(first.status == 202)
            let second = try await Self.call(api, .post, "/v1/notifications", key: key, body, headers: headers)
            #expect(second.status == 202)
            #expect(second.json["id"] as? String == first.json["id"] as? String)
            #expect(second.json["recipients"] as? Int == 2)
            #expect(second.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try await api.count("push_queue") == 2)
            // Concurrent repeats: one notification.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await Self.call(
                            api,
                            .post,
                            "/v1/notifications",
                            key: key,
                            body,
                            headers: [HTTPField.Name("Idempotency-Key")!: "burst"]
                        ).status
                    }
                }
                for try await status in group { #expect(status == 202) }
            }
            #expect(try await api.count("push_queue") == 4)
            let changed = try await Self.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                body.replacingOccurrences(of: "once", with: "twice"),
                headers: headers
            )
            #expect(changed.status == 409)
            // Keys are per API key; and after 24 hours the key is new again.
            #expect(
                try await Self.call(api, .post, "/v1/notifications", key: other, body, headers: headers).json["id"] as? String
                    != first.json["id"] as? String
            )
            try await TestDatabase.withConnection(api.url) { connection in
                try await connection.query(
                    "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE idempotency_key = 'order-42'",
                    logger: TestDatabase.logger
                )
            }
            let later = try await Self.call(api, .post, "/v1/notifications", key: key, body, headers: headers)
            #expect(later.status == 202)
            #expect(later.json["id"] as? String != first.json["id"] as? String)
            #expect(try await api.count("push_queue") == 8)
        }
    }

    @Test func onlyIfBadgeChangedSkipsDevicesThatHaveThatBadge() async throws {
        try await APIHarness.run { api in
            let key = try await Self.createKey(api.url)
            for token in [1, 2] {
                _ = try await Self.call(api, .post, "/v1/devices", key: key, #"{"token": "\#(Self.token(token))", "user": "alice"}"#)
            }
            func badge(_ value: Int, _ to: String = #"{"users": ["alice"]}"#) async throws -> Int? {
                try await Self.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": \#(to), "aps": {"badge": \#(value)}, "only_if_badge_changed": true}"#
                )
                .json["recipients"] as? Int
            }
            #expect(try await badge(3) == 2)
            #expect(try await badge(3) == 0, "unchanged: nothing queued")
            // One device got another badge meanwhile: only it gets 3 again.
            _ = try await Self.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                #"{"to": {"tokens": ["\#(Self.token(2))"]}, "aps": {"badge": 5}}"#
            )
            #expect(try await badge(3) == 1)
            #expect(
                try await TestDatabase.scalar(
                    api.url,
                    "SELECT string_agg(last_badge::text, ',' ORDER BY device_token) FROM devices",
                    as: String.self
                ) == "3,3"
            )
            // A token that is not registered has no note: it always gets it.
            #expect(try await badge(3, #"{"tokens": ["\#(Self.token(9))"]}"#) == 1)
        }
    }

    @Test func perKeyLimitsAnswer429WithRetryAfter() async throws {
        try await APIHarness.run { api in
            let slow = try await Self.createKey(api.url, name: "slow", requests: 2)
            let small = try await Self.createKey(api.url, name: "small", recipients: 3)
            let open = try await Self.createKey(api.url, name: "open")
            for _ in 0..<2 { #expect(try await Self.call(api, .get, "/v1/devices?user=a", key: slow).status == 200) }
            let limited = try await Self.call(api, .get, "/v1/devices?user=a", key: slow)
            #expect(limited.status == 429)
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(try await Self.call(api, .get, "/v1/devices?user=a", key: open).status == 200, "limits are per key")
            let tokens = (1...5).map { "\"\(Self.token($0))\"" }
            func send(_ count: Int, key: String) async throws -> (status: Int, json: [String: Any], headers: HTTPFields) {
                try await Self.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": {"tokens": [\#(tokens.prefix(count).joined(separator: ","))]}, "aps": {"alert": "x"}}"#
                )
            }
            #expect(try await send(2, key: small).status == 202)
            let before = try await Self.snapshot(api)
            let spent = try await send(2, key: small)
            #expect(spent.status == 429, "\(spent.json)")
            #expect(spent.headers[.retryAfter] != nil)
            let over = try await send(4, key: small)
            #expect(over.status == 413, "more than a minute's budget can never pass: \(over.json)")
            #expect(try await Self.snapshot(api) == before)
            #expect(try await send(1, key: small).status == 202, "what is left can be used")
            #expect(try await send(5, key: open).json["recipients"] as? Int == 5)
            #expect(try await send(1, key: "pc_live_unknown").status == 401)
            // Counted by endpoint and status, a refusal before the key is known included.
            let metrics = try await LoopbackHTTP.scrape(port: api.metricsPort)
            #expect(metrics[#"pushchat_api_requests{command="notifications.send",status="401"}"#] == 1)
            #expect(metrics[#"pushchat_api_requests{command="devices.list",status="429"}"#] == 1)
            #expect(metrics[#"pushchat_api_requests{command="notifications.send",status="202"}"#] == 3)
            #expect(metrics[#"pushchat_api_requests{command="notifications.send",status="413"}"#] == 1)
        }
    }

    /// A chunked body (no Content-Length) that grows past `api_max_json_body`: 413 with the reason, nothing written
    /// (it answered 500 "database error" before); the same for the chat API's `api_max_body`.
    @Test func aChunkedBodyPastTheLimitIs413AndWritesNothing() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let key = try await Self.createKey(url)
            var configuration = APIHarness.configuration(url: url)
            configuration.limits.maxJSONBodyBytes = 4096
            configuration.limits.maxBodyBytes = 1024
            try await APIHarness.run(configuration: configuration) { api in
                func chunked(_ path: String, _ headers: String) async throws -> String {
                    let chunk = String(repeating: "a", count: 1000)
                    var request =
                        "POST \(path) HTTP/1.1\r\nHost: localhost\r\n\(headers)Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    for _ in 0..<10 { request += "3e8\r\n\(chunk)\r\n" }
                    request += "0\r\n\r\n"
                    return String(
                        buffer: try await TLSTestClient.exchange(port: api.client.port!, tls: nil, send: ByteBuffer(string: request))
                    )
                }
                let provider = try await chunked("/v1/notifications", "Authorization: Bearer \(key)\r\nContent-Type: application/json\r\n")
                #expect(provider.hasPrefix("HTTP/1.1 413"), "\(provider.prefix(200))")
                #expect(provider.contains("api_max_json_body"))
                let chat = try await chunked("/api.php", "Content-Type: application/x-www-form-urlencoded\r\n")
                #expect(chat.hasPrefix("HTTP/1.1 413"), "\(chat.prefix(200))")
                #expect(chat.contains("Request body too large"))
                #expect(try await api.count("push_queue") == 0)
                #expect(try await api.count("notifications") == 0)
            }
        }
    }

    /// send + status read other users' device tokens through a notification's failures, and a cancel answered the
    /// status without the status scope. A failure's token is listed only when the request named it or the key may
    /// read devices; a cancel without the status scope is 204.
    @Test func failuresListOnlyTokensTheKeyMayKnowAndACancelAnswersOnlyWhatItsScopesRead() async throws {
        try await APIHarness.run { api in
            let sender = try await Self.createKey(api.url, name: "sender", scopes: KeyScope.defaults)
            let reader = try await Self.createKey(api.url, name: "reader")
            let canceler = try await Self.createKey(api.url, name: "canceler", scopes: [.send])
            #expect(
                try await Self.call(api, .post, "/v1/devices", key: reader, #"{"token": "\#(Self.token(7))", "user": "ann"}"#).status == 201
            )
            func failedStatus(_ key: String, _ body: String) async throws -> [[String: Any]] {
                let sent = try await Self.call(api, .post, "/v1/notifications", key: key, body)
                let id = try #require(sent.json["id"] as? String, "\(sent.json)")
                try await TestDatabase.admin(
                    api.url,
                    "UPDATE push_queue SET time_failed = now(), last_status = '410', last_error = 'Unregistered' WHERE notification_id = '\(id)'"
                )
                let status = try await Self.call(api, .get, "/v1/notifications/\(id)", key: key)
                #expect(status.status == 200)
                return status.json["failures"] as? [[String: Any]] ?? []
            }
            let toUsers = try await failedStatus(sender, #"{"to": {"users": ["ann"]}, "aps": {"alert": "x"}}"#)
            #expect(toUsers.count == 1 && toUsers.first?["token"] == nil, "ann's token is not the sender's to know: \(toUsers)")
            #expect(toUsers.first?["reason"] as? String == "Unregistered")
            let named = try await failedStatus(sender, #"{"to": {"tokens": ["\#(Self.token(7))"]}, "aps": {"alert": "x"}}"#)
            #expect(named.first?["token"] as? String == Self.token(7), "the caller named it")
            let byReader = try await failedStatus(reader, #"{"to": {"users": ["ann"]}, "aps": {"alert": "x"}}"#)
            #expect(byReader.first?["token"] as? String == Self.token(7), "devices:read")

            let queued = try await Self.call(
                api,
                .post,
                "/v1/notifications",
                key: canceler,
                #"{"to": {"users": ["ann"]}, "aps": {"alert": "y"}}"#
            )
            let id = try #require(queued.json["id"] as? String)
            let canceled = try await Self.call(api, .delete, "/v1/notifications/\(id)", key: canceler)
            #expect(canceled.status == 204 && canceled.json.isEmpty, "no status body without the status scope")
            #expect(
                try await TestDatabase.scalar(
                    api.url,
                    "SELECT count(*) FROM push_deliveries WHERE notification_id = \(UUID(uuidString: id)!) AND status = 'failed'",
                    as: Int64.self
                ) == 1,
                "the cancellation happened"
            )
        }
    }

    /// A key does what its scopes allow and nothing more: no listing, no broadcast, no other key's status by default;
    /// a topic outside the app's is refused. Every refusal writes nothing.
    @Test func keysDoOnlyWhatTheirScopesAllow() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let plain = try await Self.createKey(url, name: "plain", scopes: KeyScope.defaults)
            let other = try await Self.createKey(url, name: "other")
            let statusOnly = try await Self.createKey(url, name: "watcher", scopes: [.status])
            var configuration = APIHarness.configuration(url: url)
            configuration.apns.topic = "com.example.PushChat"
            try await APIHarness.run(configuration: configuration) { api in
                let register = try await Self.call(api, .post, "/v1/devices", key: plain, #"{"token": "\#(Self.token(1))", "user": "ann"}"#)
                #expect(register.status == 201)
                let list = try await Self.call(api, .get, "/v1/devices?user=ann", key: plain)
                #expect(list.status == 403)
                #expect((list.json["reason"] as? String)?.contains("devices:read") == true, "\(list.json)")
                #expect(try await Self.call(api, .get, "/v1/devices?user=ann", key: other).status == 200)
                let before = try await Self.snapshot(api)
                for target in [#"{"all": true}"#, #"{"room": "secret"}"#, #"{"udids": ["\#(String(repeating: "1", count: 40))"]}"#] {
                    let refused = try await Self.call(
                        api,
                        .post,
                        "/v1/notifications",
                        key: plain,
                        #"{"to": \#(target), "aps": {"alert": "x"}}"#
                    )
                    #expect(refused.status == 403, "\(target)")
                    #expect((refused.json["reason"] as? String)?.contains("broadcast") == true)
                }
                let topic = try await Self.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: plain,
                    #"{"to": {"users": ["ann"]}, "aps": {"alert": "x"}, "topic": "com.example.other"}"#
                )
                #expect(topic.status == 400)
                #expect(topic.json["field"] as? String == "topic")
                #expect(
                    try await Self.call(
                        api,
                        .post,
                        "/v1/notifications",
                        key: statusOnly,
                        #"{"to": {"users": ["ann"]}, "aps": {"alert": "x"}}"#
                    ).status == 403
                )
                #expect(try await Self.snapshot(api) == before, "refusals write nothing")
                let sent = try await Self.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: plain,
                    #"{"to": {"users": ["ann"]}, "aps": {"alert": "x"}, "topic": "com.example.PushChat.voip", "push_type": "voip"}"#
                )
                #expect(sent.status == 202, "\(sent.json)")
                let id = try #require(sent.json["id"] as? String)
                #expect(try await Self.call(api, .get, "/v1/notifications/\(id)", key: plain).status == 200)
                #expect(try await Self.call(api, .get, "/v1/notifications/\(id)", key: other).status == 404, "another key's notification")
                #expect(try await Self.call(api, .delete, "/v1/devices/\(Self.token(1))", key: statusOnly).status == 403)
                #expect(try await Self.call(api, .delete, "/v1/devices/\(Self.token(1))", key: plain).status == 204)
            }
        }
    }
}

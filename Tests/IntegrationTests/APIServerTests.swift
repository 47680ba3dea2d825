import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOFoundationCompat
import PostgresNIO
import Testing

@testable import API
@testable import APIServer
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

@Suite struct APIServerTests {
    @Test func joinStoresTheDevice() async throws {
        try await APIHarness.run { api in
            let response = try await api.post([
                "cmd": "join", "udid": Device.udid(1).uppercased(), "token": Device.token(1).uppercased(), "name": " Ann ", "code": "room",
            ])
            #expect(response.status == .ok)
            #expect(response.text == "OK")
            let row = try await TestDatabase.scalar(
                api.url,
                "SELECT concat_ws('|', udid, device_token, nickname, secret_code, host(ip_address), joined_at = token_updated_at) FROM active_users",
                as: String.self
            )
            #expect(row == "\(Device.udid(1))|\(Device.token(1))|Ann|room|127.0.0.1|t")
        }
    }

    @Test func joinAgainReplacesTheRow() async throws {
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "one"])
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Anna", "code": "two"])
            #expect(try await api.count("active_users") == 1)
            let row = try await TestDatabase.scalar(
                api.url,
                "SELECT nickname || '@' || secret_code || '/' || device_token FROM active_users",
                as: String.self
            )
            #expect(row == "Anna@two/\(Device.token(1))")
        }
    }

    @Test func identifierForVendorUDIDsAreNormalised() async throws {
        try await APIHarness.run { api in
            let response = try await api.post([
                "cmd": "join", "udid": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "token": "0", "name": "A", "code": "c",
            ])
            #expect(response.status == .ok)
            #expect(
                try await TestDatabase.scalar(api.url, "SELECT udid FROM active_users", as: String.self)
                    == "e621e1f8c36c495a93fc0c247a3e6e5f"
            )
        }
    }

    @Test func leaveDeletesTheDevice() async throws {
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "c"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": "0", "name": "Bob", "code": "c"])
            let response = try await api.post(["cmd": "leave", "udid": Device.udid(1)], path: "/api")
            #expect(response.status == .ok)
            #expect(try await TestDatabase.scalar(api.url, "SELECT string_agg(nickname, ',') FROM active_users", as: String.self) == "Bob")
        }
    }

    @Test func updateSetsTheTokenAndStampsIt() async throws {
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "c"])
            try await TestDatabase.withConnection(api.url) { connection in
                try await connection.query(
                    "UPDATE active_users SET token_updated_at = now() - interval '1 day'",
                    logger: TestDatabase.logger
                )
            }
            let response = try await api.post(["cmd": "update", "udid": Device.udid(1), "token": Device.token(7)])
            #expect(response.status == .ok)
            let row = try await TestDatabase.scalar(
                api.url,
                "SELECT device_token || ' ' || (token_updated_at > now() - interval '1 minute') FROM active_users",
                as: String.self
            )
            #expect(row == "\(Device.token(7)) true")
        }
    }

    @Test func messageIsStoredAndQueuedForTheOthersInTheRoom() async throws {
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "Bob", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(3), "token": "0", "name": "NoToken", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(4), "token": Device.token(1), "name": "SameTokenAsAnn", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(5), "token": Device.token(5), "name": "Elsewhere", "code": "other"])
            let response = try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "Hi \"all\"\nhow are you?"])
            #expect(response.status == .ok)
            #expect(response.text == "OK")
            let queued = try await TestDatabase.scalar(
                api.url,
                "SELECT string_agg(device_token || ' ' || payload || ' ' || (time_sent IS NULL), ';') FROM push_deliveries",
                as: String.self
            )
            #expect(queued == #"\#(Device.token(2)) {"aps":{"alert":"Ann: Hi \"all\"\nhow are you?","sound":"default"}} true"#)
            let stored = try await TestDatabase.scalar(
                api.url,
                "SELECT string_agg(concat_ws('|', secret_code, sender_udid, sender_name, text), ';') FROM messages",
                as: String.self
            )
            #expect(stored == "room|\(Device.udid(1))|Ann|Hi \"all\"\nhow are you?")
        }
    }

    @Test func aSenderWhoJoinedBeforeAlertNamesExistedIsFilledInAndQueued() async throws {
        try await APIHarness.run { api in
            try await TestDatabase.withConnection(api.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code) VALUES
                        (\(Device.udid(1)), \(Device.token(1)), 'Zoë "Z"', 'room'), (\(Device.udid(2)), \(Device.token(2)), 'Bob', 'room')
                    """,
                    logger: TestDatabase.logger
                )
            }
            let response = try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "hi"])
            #expect(response.status == .ok)
            let payload = try await TestDatabase.scalar(api.url, "SELECT payload FROM push_deliveries", as: String.self)
            #expect(payload == PushPayload.chat(name: #"Zoë "Z""#, text: "hi"))
            let alertName = try await TestDatabase.scalar(
                api.url,
                "SELECT alert_name FROM active_users WHERE nickname = 'Bob' OR alert_name IS NOT NULL ORDER BY udid LIMIT 1",
                as: String.self
            )
            #expect(alertName == #"Zoë \"Z\""#)
        }
    }

    @Test func messageFromADeviceInNoRoomWritesNothing() async throws {
        try await APIHarness.run { api in
            let before = try await api.snapshot()
            let response = try await api.post(["cmd": "message", "udid": Device.udid(9), "text": "anyone?"])
            #expect(response.status == .ok, "the tutorial's server answers OK and sends nothing")
            #expect(try await api.snapshot() == before)
        }
    }

    @Test func fetchReturnsTheRoomsMessagesSince() async throws {
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": "0", "name": "Bob", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(3), "token": "0", "name": "Eve", "code": "elsewhere"])
            for (udid, text) in [(1, "one"), (2, "two"), (3, "secret"), (1, "three ✓")] {
                try await api.post(["cmd": "message", "udid": Device.udid(udid), "text": text])
            }
            struct Answer: Decodable {
                struct Item: Decodable {
                    let id: Int64
                    let name: String
                    let text: String
                    let time: String
                }
                let messages: [Item]
                let more: Bool
            }
            let all = try JSONDecoder().decode(
                Answer.self,
                from: Data(buffer: try await api.post(["cmd": "fetch", "udid": Device.udid(2)]).body)
            )
            #expect(all.messages.map(\.text) == ["one", "two", "three ✓"])
            #expect(all.messages.map(\.name) == ["Ann", "Bob", "Ann"])
            #expect(all.more == false)
            let since = try await api.post(["cmd": "fetch", "udid": Device.udid(2), "since": "\(all.messages[0].id)"])
            #expect(since.headers[.contentType]?.hasPrefix("application/json") == true)
            let later = try JSONDecoder().decode(Answer.self, from: Data(buffer: since.body))
            #expect(later.messages.map(\.text) == ["two", "three ✓"])
            #expect(ISO8601DateFormatter().date(from: later.messages[0].time) != nil)
        }
    }

    @Test func everyBadRequestIsRefusedWithItsReasonAndWritesNothing() async throws {
        let udid = Device.udid(1)
        let token = Device.token(1)
        let cases: [(KeyValuePairs<String, String>, String)] = [
            (["cmd": "dance"], "Unknown command"),
            (["udid": udid], "Unknown command"),
            (["cmd": "join"], "Missing udid"),
            (["cmd": "join", "udid": "123"], "Invalid udid"),
            (["cmd": "join", "udid": udid], "Missing device token"),
            (["cmd": "join", "udid": udid, "token": "12ab"], "Invalid device token"),
            (["cmd": "join", "udid": udid, "token": token], "Missing name"),
            (["cmd": "join", "udid": udid, "token": token, "name": "a\u{1}"], "Invalid name"),
            (["cmd": "join", "udid": udid, "token": token, "name": "Ann"], "Missing code"),
            (["cmd": "join", "udid": udid, "token": token, "name": "Ann", "code": String(repeating: "c", count: 256)], "Invalid code"),
            (["cmd": "update", "udid": udid, "token": "0"], "Invalid device token"),
            (["cmd": "message", "udid": udid], "Missing text"),
            (["cmd": "message", "udid": udid, "text": String(repeating: "x", count: 191)], "Invalid text"),
            (["cmd": "fetch", "udid": udid, "since": "yesterday"], "Invalid since"),
        ]
        try await APIHarness.run { api in
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "Bob", "code": "room"])
            let before = try await api.snapshot()
            for (fields, reason) in cases {
                let response = try await api.post(fields)
                #expect(response.status == .badRequest, "\(reason)")
                #expect(response.errorDescription == reason)
                #expect(response.text == reason + "\n")
            }
            #expect(try await api.snapshot() == before)
        }
    }

    @Test func multipartFormsWork() async throws {
        try await APIHarness.run { api in
            let boundary = "----PushChatBoundary7MA4YWxk"
            let parts = ["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Zoë", "code": "room"]
            var body = ""
            for (name, value) in parts {
                body += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n"
            }
            body += "--\(boundary)--\r\n"
            let response = try await api.post(body: ByteBuffer(string: body), contentType: "multipart/form-data; boundary=\(boundary)")
            #expect(response.status == .ok)
            #expect(try await TestDatabase.scalar(api.url, "SELECT nickname FROM active_users", as: String.self) == "Zoë")

            let broken = try await api.post(
                body: ByteBuffer(string: "--\(boundary)\r\nnonsense"),
                contentType: "multipart/form-data; boundary=\(boundary)"
            )
            #expect(broken.status == .badRequest)
            #expect(broken.errorDescription == "Malformed multipart body")
        }
    }

    @Test func oversizedAndUnsupportedBodiesAreRefused() async throws {
        try await APIHarness.run { api in
            let before = try await api.snapshot()
            let huge = "cmd=join&udid=\(Device.udid(1))&token=0&code=c&name=" + String(repeating: "a", count: 70 * 1024)
            let tooLarge = try await api.post(body: ByteBuffer(string: huge), contentType: "application/x-www-form-urlencoded")
            #expect(tooLarge.status == .contentTooLarge)
            let json = try await api.post(body: ByteBuffer(string: #"{"cmd":"join"}"#), contentType: "application/json")
            #expect(json.status == .unsupportedMediaType)
            #expect(json.errorDescription?.hasPrefix("Unsupported content type") == true)
            #expect(try await api.snapshot() == before)
        }
    }

    /// The tutorial's server answered HTTP/1.0 and closed: a request without keep-alive gets its answer and the end
    /// of the connection (the client reads until the server closes); keep-alive keeps it open.
    @Test func http10WithoutKeepAliveIsAnsweredAndClosed() async throws {
        try await APIHarness.run { api in
            let port = try #require(api.client.port)
            let form = "cmd=join&udid=\(Device.udid(1))&token=\(Device.token(1))&name=Ann&code=old"
            let request =
                "POST /api.php HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(form.utf8.count)\r\n\r\n\(form)"
            // exchange reads until the server closes; it fails after 5 s if the connection stays open.
            let reply = String(
                buffer: try await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: request), timeout: .seconds(5))
            )
            #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply)")
            #expect(reply.lowercased().contains("connection: close"))
            #expect(reply.hasSuffix("\r\n\r\nOK"))
            let get = String(
                buffer: try await TLSTestClient.exchange(
                    port: port,
                    tls: nil,
                    send: ByteBuffer(string: "GET /healthz HTTP/1.0\r\n\r\n"),
                    timeout: .seconds(5)
                )
            )
            #expect(get.hasSuffix("ok\n"), "\(get)")

            // HTTP/1.0 with keep-alive: two requests on one connection, then the client hangs up.
            let twice = "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n"
            let both = String(
                buffer: try await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: twice), timeout: .seconds(5))
            )
            #expect(both.components(separatedBy: "ok\n").count == 3, "\(both)")
        }
    }

    @Test func helperPages() async throws {
        try await APIHarness.run { api in
            let index = try await api.get("/")
            #expect(index.status == .ok)
            #expect(index.text.contains("PushChat Server works (development mode)"))
            let database = try await api.get("/test/database")
            #expect(database.status == .ok)
            #expect(database.text == "Database OK: 0 active users\n")
            for command in ["join", "leave", "update", "message"] {
                for (suffix, field) in [("", "udid"), ("_2013", "user_id")] {
                    let page = try await api.get("/test/api_\(command)\(suffix).html")
                    #expect(page.status == .ok)
                    #expect(page.headers[.contentType] == "text/html; charset=utf-8")
                    #expect(page.text.contains(#"<form method="post" action="/api.php" id="\#(command)">"#))
                    #expect(page.text.contains(#"name="cmd" value="\#(command)""#))
                    #expect(page.text.contains(#"<input name="\#(field)""#), "\(command)\(suffix)")
                    #expect(index.text.contains("/test/api_\(command)\(suffix).html"))
                }
            }
        }
    }

    @Test func fanOutToALargeRoomIsOneStatement() async throws {
        try await APIHarness.run { api in
            let members = 3000
            try await TestDatabase.withConnection(api.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code)
                    SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g + 100000), 64, '0'), 'member ' || g, 'big room'
                    FROM generate_series(2, \(members)) g
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Host", "code": "big room"])
            let response = try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "Welcome, everyone"])
            #expect(response.status == .ok)
            #expect(try await api.count("push_queue") == Int64(members - 1))
            let distinct = try await TestDatabase.scalar(
                api.url,
                "SELECT count(DISTINCT device_token) FROM push_deliveries",
                as: Int64.self
            )
            #expect(distinct == Int64(members - 1))
            let payloads = try await TestDatabase.scalar(api.url, "SELECT count(DISTINCT payload) FROM push_deliveries", as: Int64.self)
            #expect(payloads == 1)
            // One INSERT: every row carries the same transaction (xmin) and the same command within it (cmin).
            let statements = try await TestDatabase.scalar(
                api.url,
                "SELECT count(DISTINCT (xmin::text, cmin::text)) FROM push_queue",
                as: Int64.self
            )
            #expect(statements == 1)
        }
    }

    @Test func healthAndReadiness() async throws {
        try await APIHarness.run { api in
            #expect(try await api.get("/healthz").text == "ok\n")
            let ready = try await api.get("/readyz")
            #expect(ready.status == .ok)
            #expect(ready.text == "ready\n")
        }
        let unreachable = try DatabaseURL(parsing: "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
        try await APIHarness.run(configuration: APIHarness.configuration(url: unreachable, mode: .production)) { api in
            #expect(try await api.get("/healthz").status == .ok, "the process is alive")
            let ready = try await api.get("/readyz")
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.text == "database unreachable\n")
        }
    }

    @Test func databaseFailuresAnswer5xxWithoutDetailsInProduction() async throws {
        // Nothing listens on port 1: every query fails to connect.
        let unreachable = try DatabaseURL(parsing: "postgres://nobody:secretpw@127.0.0.1:1/none?sslmode=disable")
        var configuration = APIHarness.configuration(url: unreachable, mode: .production)
        configuration.exposure.testPages = true  // for /test/database
        try await APIHarness.run(configuration: configuration, databaseTimeout: .seconds(1)) { api in
            let join = try await api.post(["cmd": "join", "udid": Device.udid(1), "token": "0", "name": "Ann", "code": "c"])
            #expect(join.status == .serviceUnavailable)
            #expect(join.errorDescription == "Database unavailable, try again later")
            #expect(join.headers[.retryAfter] == "2")
            #expect(!join.text.contains("secretpw"))
            let check = try await api.get("/test/database")
            #expect(check.status.code >= 500)
        }
    }
}

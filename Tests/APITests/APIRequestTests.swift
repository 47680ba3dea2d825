import Testing

@testable import API

@Suite struct APIRequestTests {
    static let udid = "0123456789abcdef0123456789abcdef01234567"
    static let token = String(repeating: "ab", count: 32)

    func parse(_ pairs: [String: String]) throws(APIRequestError) -> APIRequest {
        try APIRequest(fields: FormFields(pairs.mapValues { Array($0.utf8) }))
    }

    func error(_ pairs: [String: String]) -> String? {
        do {
            _ = try parse(pairs)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func join() throws {
        let request = try parse([
            "cmd": "join", "udid": " \(Self.udid.uppercased())\n", "token": Self.token.uppercased(), "name": " Ann ", "code": "room 1",
        ])
        #expect(request == .join(udid: Self.udid, token: Self.token, name: "Ann", code: "room 1"))
    }

    @Test func joinWithoutTokenYet() throws {
        let request = try parse(["cmd": "join", "udid": Self.udid, "token": "0", "name": "Ann", "code": "c"])
        #expect(request == .join(udid: Self.udid, token: "0", name: "Ann", code: "c"))
    }

    @Test func udidForms() throws {
        #expect(
            try parse(["cmd": "leave", "udid": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"]) == .leave(udid: "e621e1f8c36c495a93fc0c247a3e6e5f")
        )
        #expect(
            try parse(["cmd": "leave", "udid": "e621e1f8c36c495a93fc0c247a3e6e5f"]) == .leave(udid: "e621e1f8c36c495a93fc0c247a3e6e5f")
        )
    }

    @Test func updateAndMessageAndFetch() throws {
        #expect(try parse(["cmd": "update", "udid": Self.udid, "token": Self.token]) == .update(udid: Self.udid, token: Self.token))
        #expect(
            try parse(["cmd": "message", "udid": Self.udid, "text": "line 1\r\nline 2"])
                == .message(udid: Self.udid, text: "line 1\r\nline 2")
        )
        #expect(try parse(["cmd": "fetch", "udid": Self.udid]) == .fetch(udid: Self.udid, since: 0))
        #expect(try parse(["cmd": "fetch", "udid": Self.udid, "since": "42"]) == .fetch(udid: Self.udid, since: 42))
    }

    @Test(arguments: [
        ([:], "Unknown command"),
        (["cmd": "dance"], "Unknown command"),
        (["cmd": "join"], "Missing udid"),
        (["cmd": "join", "udid": "xyz"], "Invalid udid"),
        (["cmd": "join", "udid": String(repeating: "g", count: 40)], "Invalid udid"),
        (["cmd": "join", "udid": String(repeating: "a", count: 39)], "Invalid udid"),
        (["cmd": "join", "udid": "E621E1F8C-36C-495A-93FC-0C247A3E6E5F"], "Invalid udid"),
        (["cmd": "join", "udid": APIRequestTests.udid], "Missing device token"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": "abc"], "Invalid device token"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": String(repeating: "z", count: 64)], "Invalid device token"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token], "Missing name"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "   "], "Invalid name"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "a\tb"], "Invalid name"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "a\nb"], "Invalid name"),
        (
            ["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": String(repeating: "n", count: 256)],
            "Invalid name"
        ),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "Ann"], "Missing code"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "Ann", "code": ""], "Invalid code"),
        (["cmd": "join", "udid": APIRequestTests.udid, "token": APIRequestTests.token, "name": "Ann", "code": "a\u{7F}"], "Invalid code"),
        (["cmd": "update", "udid": APIRequestTests.udid, "token": "0"], "Invalid device token"),
        (["cmd": "update", "udid": APIRequestTests.udid], "Missing device token"),
        (["cmd": "leave"], "Missing udid"),
        (["cmd": "message", "udid": APIRequestTests.udid], "Missing text"),
        (["cmd": "message", "udid": APIRequestTests.udid, "text": ""], "Invalid text"),
        (["cmd": "message", "udid": APIRequestTests.udid, "text": String(repeating: "t", count: 191)], "Invalid text"),
        (["cmd": "message", "udid": APIRequestTests.udid, "text": "bell\u{07}"], "Invalid text"),
        (["cmd": "message", "udid": APIRequestTests.udid, "text": "tab\there"], "Invalid text"),
        (["cmd": "fetch", "udid": APIRequestTests.udid, "since": "-1"], "Invalid since"),
        (["cmd": "fetch", "udid": APIRequestTests.udid, "since": "99999999999999999999"], "Invalid since"),
        // The 2013 app's user_id: errors name the field the client used.
        (["cmd": "join", "user_id": ""], "Missing user_id"),
        (["cmd": "join", "user_id": "  "], "Missing user_id"),
        (["cmd": "join", "user_id": "xyz"], "Invalid user_id"),
        (["cmd": "leave", "user_id": String(repeating: "A", count: 31)], "Invalid user_id"),
        (["cmd": "message", "user_id": String(repeating: "G", count: 32), "text": "hi"], "Invalid user_id"),
        (["cmd": "update", "user_id": "4A0F2B9C8D7E6F5A4B3C2D1E0F9A8B7C"], "Missing device token"),
        (["cmd": "fetch", "user_id": "4A0F2B9C8D7E6F5A4B3C2D1E0F9A8B7C", "since": "x"], "Invalid since"),
    ])
    func refuses(fields: [String: String], description: String) {
        #expect(error(fields) == description)
    }

    /// The 2013 app sends `user_id`: an NSUUID without dashes, upper-case (its test forms: 40 digits). It names the
    /// same device as the 2011 app's `udid` with the same digits, for every command.
    @Test func userIDIsTheUdidOfThe2013App() throws {
        let upper = "4A0F2B9C8D7E6F5A4B3C2D1E0F9A8B7C"
        let lower = upper.lowercased()
        #expect(
            try parse(["cmd": "join", "user_id": upper, "token": Self.token, "name": "Ann", "code": "c"])
                == .join(udid: lower, token: Self.token, name: "Ann", code: "c")
        )
        #expect(try parse(["cmd": "leave", "user_id": upper]) == .leave(udid: lower))
        #expect(try parse(["cmd": "update", "user_id": upper, "token": Self.token]) == .update(udid: lower, token: Self.token))
        #expect(try parse(["cmd": "message", "user_id": upper, "text": "hi"]) == .message(udid: lower, text: "hi"))
        #expect(try parse(["cmd": "fetch", "user_id": upper]) == .fetch(udid: lower, since: 0))
        #expect(try parse(["cmd": "leave", "user_id": Self.udid.uppercased()]) == .leave(udid: Self.udid))
        // Both fields: udid, the original, wins.
        #expect(try parse(["cmd": "leave", "udid": Self.udid, "user_id": upper]) == .leave(udid: Self.udid))
    }

    @Test func limitsAreInclusive() throws {
        let name = String(repeating: "é", count: 127) + "x"  // 255 bytes
        #expect(name.utf8.count == 255)
        #expect(error(["cmd": "join", "udid": Self.udid, "token": Self.token, "name": name, "code": "c"]) == nil)
        let text = String(repeating: "€", count: 63) + "x"  // 190 bytes
        #expect(error(["cmd": "message", "udid": Self.udid, "text": text]) == nil)
        #expect(error(["cmd": "message", "udid": Self.udid, "text": text + "x"]) == "Invalid text")
    }

    @Test func invalidUTF8IsRefused() {
        let fields = FormFields(["cmd": Array("message".utf8), "udid": Array(Self.udid.utf8), "text": [0x68, 0xC3, 0x28]])
        #expect(throws: APIRequestError.invalidText) { try APIRequest(fields: fields) }
    }
}

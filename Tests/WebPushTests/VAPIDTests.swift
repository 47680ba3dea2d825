import Crypto
import Foundation
import Testing

@testable import Support
@testable import WebPush

/// VAPID (RFC 8292): the token a push request carries, and a push service's check of it.
@Suite struct VAPIDTests {
    /// RFC 8292 §2.4's example: its token and key, as the RFC prints them.
    enum Example {
        static let token =
            "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL3B1c2guZXhhbXBsZS5uZXQiLCJleHAiOjE0NTM1MjM3NjgsInN1YiI6Im1haWx0bzpwdXNoQGV4YW1wbGUuY29tIn0.i3CYb7t4xfxCDquptFOepC9GAu_HLGkMlMuCGSK2rpiUfnK9ojFwDXb1JrErtmysazNjjvW2L9OkSSHzvoD1oA"
        static let key = "BA1Hxzyi1RUM1b5wjxsn7nGxAszw2u61m164i3MrAIxHF6YK5h4SDYic-dRuU_RCPCfA5aq9ojSwk5Y2EmClBPs"
        static let expires: Int64 = 1_453_523_768
    }

    /// The same claims give the example's header and claims byte for byte (ECDSA's signature is random, so the
    /// signature is checked rather than compared), and the example's signature holds under its key with this check.
    @Test func theRFCsExample() throws {
        let token = VAPIDToken(audience: "https://push.example.net", expires: Example.expires, subject: "mailto:push@example.com")
        #expect(token.signingInput == Example.token.split(separator: ".").prefix(2).joined(separator: "."))
        let read = try VAPIDToken.verify(
            authorization: "vapid t=\(Example.token), k=\(Example.key)",
            audience: "https://push.example.net",
            now: Date(timeIntervalSince1970: TimeInterval(Example.expires - 3600))
        )
        #expect(read == token)
        var forged = Example.token
        forged.replaceSubrange(forged.index(forged.endIndex, offsetBy: -3)..<forged.endIndex, with: "AAA")
        #expect(throws: WebPushError.self, "a changed signature") {
            try VAPIDToken.verify(
                authorization: "vapid t=\(forged), k=\(Example.key)",
                audience: "https://push.example.net",
                now: Date(timeIntervalSince1970: TimeInterval(Example.expires - 3600))
            )
        }
    }

    @Test func signedTokensAreCheckedAsAPushServiceDoes() throws {
        let key = VAPIDKey.generate()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = VAPIDToken(
            audience: "https://push.example.net:8443",
            expires: 1_800_000_000 + VAPIDToken.lifetime,
            subject: "mailto:ops@example.com"
        )
        let header = try token.authorization(signedWith: key)
        #expect(header.hasPrefix("vapid t=") && header.hasSuffix(", k=\(key.publicKey)"))
        #expect(
            try VAPIDToken.verify(authorization: header, audience: "https://push.example.net:8443", expectedKey: key.publicKey, now: now)
                == token
        )
        func refused(_ reason: String, _ check: () throws -> VAPIDToken) {
            #expect(throws: WebPushError.self, Comment(rawValue: reason)) { _ = try check() }
        }
        refused("another audience") { try VAPIDToken.verify(authorization: header, audience: "https://push.example.net", now: now) }
        refused("another key than the subscription's") {
            try VAPIDToken.verify(
                authorization: header,
                audience: "https://push.example.net:8443",
                expectedKey: VAPIDKey.generate().publicKey,
                now: now
            )
        }
        refused("expired") {
            try VAPIDToken.verify(authorization: header, audience: "https://push.example.net:8443", now: now.addingTimeInterval(13 * 3600))
        }
        let far = try VAPIDToken(audience: "https://a.example", expires: 1_800_000_000 + 25 * 3600, subject: "mailto:a@b.c")
            .authorization(signedWith: key)
        refused("more than 24 hours ahead") { try VAPIDToken.verify(authorization: far, audience: "https://a.example", now: now) }
        refused("not vapid") { try VAPIDToken.verify(authorization: "Bearer x", audience: "https://a.example", now: now) }
    }

    /// The key file as the guide's openssl command writes it (SEC 1, `EC PRIVATE KEY`) and as `generate-key` writes it
    /// (PKCS #8); another curve and garbage are refused without echoing the file.
    @Test func keyFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vapid-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func openssl(_ curve: String) throws -> String {
            let path = directory.appendingPathComponent("\(curve).pem").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl", "ecparam", "-name", curve, "-genkey", "-noout", "-out", path]
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            return path
        }
        let sec1 = try openssl("prime256v1")
        #expect(try String(contentsOfFile: sec1, encoding: .utf8).hasPrefix("-----BEGIN EC PRIVATE KEY-----"))
        let key = try VAPIDKey(file: sec1)
        #expect(Base64URL.decode(key.publicKey)?.count == 65)
        let again = try VAPIDKey(pem: key.pem)
        #expect(again.publicKey == key.publicKey)
        let error = #expect(throws: WebPushError.self) { try VAPIDKey(file: try openssl("secp384r1")) }
        #expect(error?.code == .badVAPID)
        #expect(throws: WebPushError.self) { try VAPIDKey(pem: "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n") }
        #expect(!String(describing: key).contains(key.pem), "the description shows the public key only")
    }

    @Test func subjects() throws {
        try VAPIDToken.checkSubject("mailto:ops@example.com")
        try VAPIDToken.checkSubject("https://chat.example/contact")
        for bad in ["ops@example.com", "mailto:", "http://chat.example", "https://", ""] {
            #expect(throws: WebPushError.self, Comment(rawValue: bad)) { try VAPIDToken.checkSubject(bad) }
        }
    }
}

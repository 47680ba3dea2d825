import Foundation
import Testing
import _CryptoExtras

@testable import FCM
@testable import Support

/// The service account file: Google's fields, each checked with an error that names it.
@Suite struct ServiceAccountTests {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    static func file(_ overrides: [String: String?] = [:]) -> Data {
        var fields: [(String, String?)] = [
            ("type", "service_account"), ("project_id", "pushchat-dev"), ("private_key_id", "0123abcd"),
            ("private_key", key.pemRepresentation), ("client_email", "pushchat@pushchat-dev.iam.gserviceaccount.com"),
            ("token_uri", "https://oauth2.googleapis.com/token"),
        ]
        for (name, value) in overrides {
            if let index = fields.firstIndex(where: { $0.0 == name }) { fields[index].1 = value } else { fields.append((name, value)) }
        }
        let members = fields.compactMap { name, value in value.map { JSONText.quoted(name) + ":" + JSONText.quoted($0) } }
        return Data(("{" + members.joined(separator: ",") + "}").utf8)
    }

    @Test func aGoodFileGivesTheProjectTheAccountAndTheTokenURI() throws {
        let account = try ServiceAccount(json: Self.file(), path: "/etc/pushchat/fcm.json")
        #expect(account.projectID == "pushchat-dev")
        #expect(account.clientEmail == "pushchat@pushchat-dev.iam.gserviceaccount.com")
        #expect(account.privateKeyID == "0123abcd")
        #expect(account.tokenURI.absoluteString == "https://oauth2.googleapis.com/token")
    }

    @Test(
        arguments: [
            (["type": "authorized_user"], "\"type\" is \"authorized_user\""),
            (["project_id": nil], "no \"project_id\" string"),
            (["project_id": "Not_A_Project"], "\"project_id\" is not"),
            (["client_email": "nobody"], "\"client_email\" is not an e-mail address"),
            (["token_uri": "http://oauth2.googleapis.com/token"], "\"token_uri\" is not an https URL"),
            (
                ["private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"],
                "\"private_key\" is not an RSA private key"
            ),
        ] as [([String: String?], String)]
    )
    func aBadFieldIsNamed(overrides: [String: String?], reason: String) {
        #expect {
            try ServiceAccount(json: Self.file(overrides), path: "/etc/pushchat/fcm.json")
        } throws: { error in
            let error = error as? ServiceAccountError
            return error?.exitStatus == 78 && error?.description.hasPrefix("fcm_service_account_file: /etc/pushchat/fcm.json: ") == true
                && error?.reason.contains(reason) == true && error?.description.contains("PRIVATE KEY") == false
        }
    }

    @Test func notJSONAndAMissingFileAreRefused() {
        #expect(throws: ServiceAccountError(code: .unreadableFile, path: "/nonexistent/fcm.json", reason: "cannot read the file")) {
            try ServiceAccount(file: "/nonexistent/fcm.json")
        }
        #expect(throws: ServiceAccountError.self) { try ServiceAccount(json: Data("not json".utf8), path: "f") }
        #expect(throws: ServiceAccountError.self) { try ServiceAccount(json: Data("[1]".utf8), path: "f") }
    }
}

/// The OAuth assertion: signed by the account's key, verified as Google's token endpoint does.
@Suite struct OAuthAssertionTests {
    static let account = try! ServiceAccount(json: ServiceAccountTests.file(), path: "f")
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let uri = "https://oauth2.googleapis.com/token"

    @Test func anAssertionCarriesTheClaimsAndVerifiesWithThePublicKey() throws {
        let assertion = try OAuthAssertion.make(for: Self.account, now: Self.now)
        let claims = try OAuthAssertion.verify(assertion, key: ServiceAccountTests.key.publicKey, tokenURI: Self.uri, now: Self.now).get()
        #expect(claims.issuer == "pushchat@pushchat-dev.iam.gserviceaccount.com")
        #expect(claims.scope == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims.audience == Self.uri)
        #expect(claims.expires - claims.issuedAt == 3600)
        let header = try JSON.parse(try #require(Base64URL.decode(String(assertion.split(separator: ".")[0]))))
        #expect(header["alg"]?.stringValue == "RS256" && header["kid"]?.stringValue == "0123abcd")
        #expect(
            OAuthAssertion.requestBody(assertion: "a.b.c")
                == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant%2Dtype%3Ajwt%2Dbearer&assertion=a.b.c"
        )
    }

    @Test func anotherKeyATamperedTokenAnExpiredOneOrAnotherAudienceAreRefused() throws {
        let assertion = try OAuthAssertion.make(for: Self.account, now: Self.now)
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey
        #expect(throws: OAuthAssertion.VerificationFailure.self) {
            try OAuthAssertion.verify(assertion, key: other, tokenURI: Self.uri, now: Self.now).get()
        }
        var parts = assertion.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"iss":"mallory@example.com","scope":"x","aud":"y","iat":1,"exp":2}"#.utf8))
        let key = ServiceAccountTests.key.publicKey
        #expect(
            OAuthAssertion.verify(parts.joined(separator: "."), key: key, tokenURI: Self.uri, now: Self.now)
                == .failure(.init("invalid signature"))
        )
        #expect(
            OAuthAssertion.verify(assertion, key: key, tokenURI: Self.uri, now: Self.now.addingTimeInterval(3601))
                == .failure(.init("invalid iat/exp"))
        )
        #expect(
            OAuthAssertion.verify(assertion, key: key, tokenURI: "https://example.com/token", now: Self.now)
                == .failure(.init("aud is not the token URI"))
        )
        #expect(OAuthAssertion.verify("garbage", key: key, tokenURI: Self.uri, now: Self.now) == .failure(.init("malformed assertion")))
    }
}

/// RS256 against the example of RFC 7515 appendix A.2, an answer computed elsewhere: PKCS #1 v1.5 is deterministic, so
/// the signature of the RFC's signing input with the RFC's key is the RFC's signature, byte for byte.
@Suite struct RS256KnownAnswerTests {
    /// A.2.1's key (n, e, d, p, q of the JWK), as PKCS #8.
    static let keyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCh+BYK4uPJtGXO
        jS1lYmM2K5J9vinh8CR3/BYlzJChNuOL2TSXxbbqY913EeZ8dCn5VrD7io8ImtxL
        aYk8wTM/U+3QGbh3hCUv7JFP5IV3aVlL6kKA0ywPVb9ilE8TA5a8bpvfbr3SvaNn
        juygxmj3AbONv/s4yDQs4v5tJ/reSlpIdJed1LnPmt7Ex1sFhSwsD174pcF1A5L5
        ROjtZMEQxrZHYJqkeDrrnGya11UxMFBji4NmXG9veoKjlnAqH2QbgtPr8jkiGUkf
        toaHLFcW9Qr4NY2ai50Xw0Byj3+H2JoY2PyrZ62EWQwuz3WTOTY8BwNNb2BvniHg
        VFbK5emhAgMBAAECggEAEq5xpGnNCivDflJsRQBXHx1hdR1k6Ulwe2JZD50LpXyW
        PEAeP88vLNO97IjlA7/GQ5sLKMgvfTeXZx9SE+7YwVol2NXOoAJe46sui395IW/G
        O+pWJ1O0BkTGoVEn2bKVRUCgu+GjBVaYLU6f3l9kJfFNS3E0QbVdxzubSu3Mkqzj
        kn439X0M/V51gfpRLI9JYanrC4D4qAdGcopV/0ZHHzQlBjudU2QvXt4ehNYTCBr6
        XCLQUShb1juUO1ZdiYoFaFQT5Tw8bGUl/x/jTj3ccPDVZFD9pIuhLhBOneufuBiB
        4cS98l2SR/RQyGWSeWjnczT0QU91p1DhOVRuOopznQKBgQDgHMQQ60imZV1URk0K
        pLttoLhyt3SmqdEf/kgHePDdtzEafpAu+cS191R2JiuoF2yzWXnwFDcqGigp5BNr
        0AHQfD8/Lk8l1Mk09jxxCfui5nYooNyac8YFjm3vItzVCVDnEd3BbVWG8qf6deqE
        lMGAg+C2V0L4oNXnP7LZcPAZRwKBgQC5A8R+CZW2MvRTLLHzwZkUXV866cff7tx6
        kqa0finGG0KgeqlaZPxgCZnFp7AeAcCMtiynVlJ7vMVgePsLq6XtON4tB5kP9jAP
        rq3rbAOal78eUH5OcED6eNuCV8ixEu1eWcPNCS/l1OW1EnXUEoEHKl54Xrrz2uNw
        kgMTP1FZ1wKBgAcCn1dwJKufzBWQxWQp1vsM5fggqPN1qGb5y0MAk3g7/Ls5bkUp
        5u9SN0Ai3Ya6hNnvWJMb7sXQX6U/zyO2M/hTip7tUeh7CXgwo59dkpN75gJLVds2
        9+DAncu3KXU4f2Fa+7bLNrur53k8KwPOq2bbuTG69QtV7Jr5MR0AHWKNAoGBAIf/
        evpitUf+4JYbLpvNXWcY052Mpz22aR84mY3nh3F2LF2mjMJDpTg7FmuyPcVw6EcG
        yoAe9fa65iNqCq+jdw6PVNGo2hxfjSiZ8IIzHdsPXI89//pMjZcQK9r+CCoRjaZj
        OYiIDktVWZzmevJuv6WywUqd57LE3Zar3dLSIkx1AoGAIYd7DHOhrWvxkwPQsRM2
        tOgrjbcrfvtQJipd+DlcxyVuuM9sQLdgjVk2oy26F0EmpScGLq2MowX7fhd/QJQ3
        ydy5cY7YIBi87w93IKLEdfnbJtoOPLUW0ITrJReOgo1cq9SbsxYawBgfp/gh6A56
        03k2+ZQwVK0JKSHuLFkuQ3U=
        -----END PRIVATE KEY-----
        """
    /// A.2.1's JWK `n`, to check the PEM above is the RFC's key.
    static let modulus =
        "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_"
        + "YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQ"
        + "Y4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    /// A.2.1's JWS Signing Input (the header {"alg":"RS256"} and the JWT example's claims).
    static let signingInput =
        "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    /// A.2.1's JWS Signature.
    static let signature =
        "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQ"
        + "jbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHW"
        + "EsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"

    @Test func theAssertionsSignatureIsTheRFCs() throws {
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: Self.keyPEM)
        #expect(try key.publicKey.getKeyPrimitives().modulus == Data(try #require(Base64URL.decode(Self.modulus))))
        #expect(try OAuthAssertion.sign(Self.signingInput, with: key) == Self.signature)
    }

    /// The verifier (the simulator's token endpoint) takes the RFC's signature and refuses it one bit off: the RFC's
    /// token then fails on its claims, not on its signature.
    @Test func theVerifierTakesTheRFCsSignature() throws {
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: Self.keyPEM).publicKey
        let now = Date(timeIntervalSince1970: 1_300_819_000)
        let token = Self.signingInput + "." + Self.signature
        #expect(OAuthAssertion.verify(token, key: key, tokenURI: "t", now: now) == .failure(.init("missing claims")))
        var bytes = try #require(Base64URL.decode(Self.signature))
        bytes[bytes.count - 1] ^= 1
        let flipped = Self.signingInput + "." + Base64URL.encode(bytes)
        #expect(OAuthAssertion.verify(flipped, key: key, tokenURI: "t", now: now) == .failure(.init("invalid signature")))
    }
}

/// One access token for everyone: refreshed before it expires and once per 401, never per request.
@Suite struct AccessTokenCacheTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func theTokenEndpointsAnswerIsParsed() {
        let token = AccessToken(body: Array(#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8), now: Self.now)
        #expect(token == AccessToken(value: "ya29.abc", expires: Self.now.addingTimeInterval(3599)))
        #expect(AccessToken(body: Array(#"{"error":"invalid_grant"}"#.utf8), now: Self.now) == nil)
        #expect(AccessToken(body: Array(#"{"access_token":"a b","expires_in":10}"#.utf8), now: Self.now) == nil)
    }

    @Test func oneRefreshAtATimeAndBeforeExpiry() {
        var cache = AccessTokenCache()
        #expect(cache.token(now: Self.now) == .refresh)
        #expect(cache.token(now: Self.now) == .wait, "a second caller waits for the first's refresh")
        cache.refreshed(AccessToken(value: "t1", expires: Self.now.addingTimeInterval(3600)))
        #expect(cache.token(now: Self.now) == .use("t1"))
        #expect(cache.token(now: Self.now.addingTimeInterval(3600 - 299)) == .refresh, "refreshed 5 minutes before expiry")
        cache.refreshFailed()
        #expect(cache.token(now: Self.now.addingTimeInterval(3600 - 299)) == .refresh, "a failed refresh is tried again")
    }

    @Test func many401sWithOneTokenRefreshItOnce() {
        var cache = AccessTokenCache()
        _ = cache.token(now: Self.now)
        cache.refreshed(AccessToken(value: "old", expires: Self.now.addingTimeInterval(3600)))
        cache.rejected("old")
        #expect(cache.token(now: Self.now) == .refresh)
        cache.refreshed(AccessToken(value: "new", expires: Self.now.addingTimeInterval(3600)))
        for _ in 0..<50 { cache.rejected("old") }
        #expect(cache.token(now: Self.now) == .use("new"), "late 401s to the old token leave the new one")
    }
}

/// Each FCM answer gets Google's documented handling.
@Suite struct FCMAnswerTests {
    static func error(_ status: Int, _ canonical: String, _ code: String?) -> [UInt8] {
        let details =
            code.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        return Array(#"{"error":{"code":\#(status),"message":"m","status":"\#(canonical)"\#(details)}}"#.utf8)
    }

    @Test func verdicts() {
        #expect(FCMAnswer(status: 200, body: Array(#"{"name":"projects/p/messages/1"}"#.utf8), retryAfter: nil).verdict == .sent)
        let gone = FCMAnswer(status: 404, body: Self.error(404, "NOT_FOUND", "UNREGISTERED"), retryAfter: nil)
        #expect(gone.verdict == .unregistered && gone.statusText == "404 UNREGISTERED")
        #expect(FCMAnswer(status: 400, body: Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"), retryAfter: nil).verdict == .failed)
        #expect(
            FCMAnswer(status: 403, body: Self.error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), retryAfter: nil).verdict
                == .misconfigured
        )
        #expect(
            FCMAnswer(status: 429, body: Self.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "30").verdict
                == .retryLater(after: 30)
        )
        #expect(
            FCMAnswer(status: 503, body: Self.error(503, "UNAVAILABLE", "UNAVAILABLE"), retryAfter: nil).verdict == .retryLater(after: nil)
        )
        #expect(
            FCMAnswer(status: 500, body: Array("<html>".utf8), retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT").verdict
                == .retryLater(after: nil)
        )
        #expect(FCMAnswer(status: 401, body: Self.error(401, "UNAUTHENTICATED", nil), retryAfter: nil).verdict == .refreshToken)
        #expect(
            FCMAnswer(status: 404, body: Self.error(404, "NOT_FOUND", nil), retryAfter: nil).verdict == .failed,
            "a wrong project is no deletion"
        )
    }
}

/// The request body FCM takes.
@Suite struct FCMMessageTests {
    @Test func theBodyHasTheTokenTheNotificationTheStringDataAndTheAndroidOptions() throws {
        var message = FCMMessage(token: "fcm:token_1")
        message.title = "PushChat"
        message.body = "Bob: \"hi\""
        message.data = [(key: "room", value: "lobby")]
        message.priority = "high"
        message.ttlSeconds = 3600
        message.collapseKey = "chat"
        #expect(
            message.json
                == #"{"message":{"token":"fcm:token_1","notification":{"title":"PushChat","body":"Bob: \"hi\""},"data":{"room":"lobby"},"android":{"priority":"high","ttl":"3600s","collapse_key":"chat"}}}"#
        )
        #expect(message.dataBytes == 9)
        #expect(FCMMessage(token: "t").json == #"{"message":{"token":"t"}}"#)
    }

    @Test func tokenShapes() {
        #expect(FCMMessage.isToken("dKx3" + String(repeating: "a", count: 100) + ":APA91b-_x"))
        #expect(!FCMMessage.isToken("short"))
        #expect(!FCMMessage.isToken(String(repeating: "a", count: 120) + " b"))
        #expect(!FCMMessage.isToken(String(repeating: "a", count: 120) + "\""))
    }
}

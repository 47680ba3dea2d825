package import Crypto
import Foundation

/// The `aes128gcm` content coding of a push message (RFC 8188) with Web Push's keys (RFC 8291 §3.4): a fresh ECDH key
/// pair and salt per message, one record.
///
/// The body: salt (16) | record size (4, big-endian) | key id length (1, 65) | the sender's ephemeral public key (65) |
/// the record: AES-128-GCM of the plaintext, a 0x02 delimiter (last record) and zero padding, then the 16-byte tag.
package enum ContentEncryption {
    /// The header's length: salt, record size, key id length, key id.
    package static let headerLength = 16 + 4 + 1 + 65
    /// The most a body may be: every push service takes 4,096 bytes (RFC 8030 §7.2).
    package static let maximumBody = 4_096
    /// The most plaintext one record of a 4,096-byte body holds: 4,096 - 86 - 16 (tag) - 1 (delimiter).
    package static let maximumPlaintext = maximumBody - headerLength - 16 - 1

    /// The keys of one message (RFC 8291 §3.3–3.4 and RFC 8188 §2.2), each step kept for the known-answer tests.
    package struct Keys: Sendable, Equatable {
        /// ECDH(sender's ephemeral private key, browser's public key): the x coordinate, 32 bytes.
        package let ecdhSecret: [UInt8]
        /// HKDF-Extract(salt: auth, ecdhSecret).
        package let authenticationPRK: [UInt8]
        /// HKDF-Expand(authenticationPRK, "WebPush: info" 0x00 ua_public as_public, 32).
        package let inputKeyingMaterial: [UInt8]
        /// HKDF-Extract(salt: salt, inputKeyingMaterial).
        package let pseudoRandomKey: [UInt8]
        /// HKDF-Expand(pseudoRandomKey, "Content-Encoding: aes128gcm" 0x00, 16).
        package let contentEncryptionKey: [UInt8]
        /// HKDF-Expand(pseudoRandomKey, "Content-Encoding: nonce" 0x00, 12): the only record's nonce (sequence 0).
        package let nonce: [UInt8]

        /// The keys from the shared secret, the browser's auth secret and both public keys (uncompressed points).
        /// Each HKDF step is one HMAC-SHA256 (every output is at most one hash long: Expand is HMAC(PRK, info | 0x01)),
        /// and the last two share their key's schedule.
        package init(ecdhSecret: [UInt8], authSecret: [UInt8], userAgentPublic: [UInt8], senderPublic: [UInt8], salt: [UInt8]) {
            self.ecdhSecret = ecdhSecret
            authenticationPRK = Self.hmac(key: authSecret, ecdhSecret)
            var info = Self.webPushInfo
            info.reserveCapacity(info.count + userAgentPublic.count + senderPublic.count + 1)
            info += userAgentPublic
            info += senderPublic
            info.append(1)
            inputKeyingMaterial = Self.hmac(key: authenticationPRK, info)
            pseudoRandomKey = Self.hmac(key: salt, inputKeyingMaterial)
            let keyed = HMAC<SHA256>(key: SymmetricKey(data: pseudoRandomKey))
            contentEncryptionKey = Self.finish(keyed, Self.contentEncodingInfo, count: 16)
            nonce = Self.finish(keyed, Self.nonceInfo, count: 12)
        }

        /// `WebPush: info` 0x00, then both public keys and Expand's counter 0x01.
        private static let webPushInfo = Array("WebPush: info".utf8) + [0]
        /// `Content-Encoding: aes128gcm` 0x00 and Expand's counter 0x01.
        private static let contentEncodingInfo = Array("Content-Encoding: aes128gcm".utf8) + [0, 1]
        /// `Content-Encoding: nonce` 0x00 and Expand's counter 0x01.
        private static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0, 1]

        private static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
            Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
        }

        private static func finish(_ keyed: HMAC<SHA256>, _ data: [UInt8], count: Int) -> [UInt8] {
            var mac = keyed
            mac.update(data: data)
            return Array(Array(mac.finalize()).prefix(count))
        }
    }

    /// Encrypts `plaintext` for `subscription`: a new ephemeral key pair and salt unless given (the known-answer tests
    /// give the RFC's). `recordSize` is the header's record size (4,096, as RFC 8291's example and browsers use).
    /// A fresh key pair for one message: a scalar of 32 bytes from the system's secure generator (drawn again in the
    /// 2^-32 case that it is not a valid P-256 scalar). What `P256.KeyAgreement.PrivateKey()` gives, at an eighth of
    /// its cost here (16 µs against 130: the bench's Web Push figures), which is most of a message's.
    package static func freshKey() -> P256.KeyAgreement.PrivateKey {
        while true {
            let scalar = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) { return key }
        }
    }

    package static func encrypt(
        _ plaintext: [UInt8],
        for subscription: WebPushSubscription,
        sender: P256.KeyAgreement.PrivateKey = freshKey(),
        salt: [UInt8]? = nil,
        recordSize: UInt32 = 4_096
    ) throws(WebPushError) -> [UInt8] {
        guard plaintext.count <= maximumPlaintext else {
            throw WebPushError(
                code: .tooLarge,
                reason: "the message is \(plaintext.count) bytes; encrypted for a browser it may hold at most \(maximumPlaintext)"
            )
        }
        let salt = salt ?? SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }
        let senderPublic = Array(sender.publicKey.x963Representation)
        let keys: Keys
        do {
            let shared = try sender.sharedSecretFromKeyAgreement(with: subscription.userAgentKey)
            keys = Keys(
                ecdhSecret: shared.withUnsafeBytes { Array($0) },
                authSecret: subscription.authSecret,
                userAgentPublic: subscription.userAgentPublic,
                senderPublic: senderPublic,
                salt: salt
            )
        } catch {
            throw WebPushError(code: .badKeys, reason: "no shared secret with the browser's key")
        }
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(
                plaintext + [0x02],
                using: SymmetricKey(data: keys.contentEncryptionKey),
                nonce: try AES.GCM.Nonce(data: keys.nonce)
            )
        } catch {
            throw WebPushError(code: .badKeys, reason: "AES-128-GCM refused the keys")
        }
        var body = salt
        body.reserveCapacity(headerLength + plaintext.count + 17)
        withUnsafeBytes(of: recordSize.bigEndian) { body.append(contentsOf: $0) }
        body.append(UInt8(senderPublic.count))
        body += senderPublic
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }

    /// What a browser does with a body: the plaintext, without its delimiter and padding. The simulator's browsers
    /// use it; a body that is not one aes128gcm record for these keys is refused.
    package static func decrypt(
        _ body: [UInt8],
        userAgentKey: P256.KeyAgreement.PrivateKey,
        authSecret: [UInt8]
    ) throws(WebPushError) -> [UInt8] {
        guard body.count >= headerLength + 17, body[20] == 65 else {
            throw WebPushError(code: .undecryptable, reason: "not an aes128gcm body with a 65-byte key id")
        }
        let salt = Array(body[0..<16])
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let senderPublic = Array(body[21..<86])
        let record = body[86...]
        guard record.count <= recordSize else {
            throw WebPushError(code: .undecryptable, reason: "more than one record (record size \(recordSize))")
        }
        do {
            let sender = try P256.KeyAgreement.PublicKey(x963Representation: senderPublic)
            let shared = try userAgentKey.sharedSecretFromKeyAgreement(with: sender)
            let keys = Keys(
                ecdhSecret: shared.withUnsafeBytes { Array($0) },
                authSecret: authSecret,
                userAgentPublic: Array(userAgentKey.publicKey.x963Representation),
                senderPublic: senderPublic,
                salt: salt
            )
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: keys.nonce),
                ciphertext: record.dropLast(16),
                tag: record.suffix(16)
            )
            var padded = Array(try AES.GCM.open(box, using: SymmetricKey(data: keys.contentEncryptionKey)))
            while padded.last == 0 { padded.removeLast() }
            guard padded.last == 0x02 else {
                throw WebPushError(code: .undecryptable, reason: "the record does not end with the last record's delimiter")
            }
            padded.removeLast()
            return padded
        } catch let error as WebPushError {
            throw error
        } catch {
            throw WebPushError(code: .undecryptable, reason: "the record does not open with these keys")
        }
    }
}

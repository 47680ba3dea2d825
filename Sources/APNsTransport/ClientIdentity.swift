package import APNs
package import Foundation
package import NIOSSL
import Settings
import Support

/// The provider's TLS identity for APNs: a certificate chain and its private key, loaded from the tutorial's
/// `ck.pem` shape (certificate + passphrase-encrypted key, PKCS#8 or the older `Proc-Type: 4,ENCRYPTED` form),
/// an unencrypted PEM, or PKCS#12 (`.p12`).
package struct ClientIdentity: Sendable {
    package let certificateChain: [NIOSSLCertificate]
    package let privateKey: NIOSSLPrivateKey
    /// The file it came from, for messages.
    package let path: String

    /// When the certificate (the chain's first) stops being valid: Apple's provider certificates last a year.
    package var notValidAfter: Date { Date(timeIntervalSince1970: TimeInterval(certificateChain[0].notValidAfter)) }

    /// Loads `path`; a wrong passphrase or a file without a key throws a ``CertificateError`` naming the file.
    package static func load(path: String, passphrase: String?) throws(CertificateError) -> ClientIdentity {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CertificateError(code: .unreadableFile, path: path, reason: "cannot read the file")
        }
        let isPEM = data.starts(with: Array("-----".utf8)) || String(decoding: data.prefix(4096), as: UTF8.self).contains("-----BEGIN ")
        return isPEM ? try loadPEM(data, path: path, passphrase: passphrase) : try loadPKCS12(path: path, passphrase: passphrase)
    }

    private static func loadPEM(_ data: Data, path: String, passphrase: String?) throws(CertificateError) -> ClientIdentity {
        let text = String(decoding: data, as: UTF8.self)
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw CertificateError(code: .noCertificate, path: path, reason: "no readable certificate in the file")
        }
        guard !certificates.isEmpty else {
            throw CertificateError(code: .noCertificate, path: path, reason: "no certificate in the file")
        }
        guard text.contains("PRIVATE KEY-----") else {
            throw CertificateError(
                code: .noPrivateKey,
                path: path,
                reason: "no private key in the file (expected the certificate and its key)"
            )
        }
        let encrypted = text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED")
        if encrypted && (passphrase ?? "").isEmpty {
            throw CertificateError(
                code: .passphraseRequired,
                path: path,
                reason: "the private key is encrypted: set PUSHCHAT_APNS_PASSPHRASE"
            )
        }
        let key: NIOSSLPrivateKey
        do {
            if encrypted, let passphrase {
                key = try NIOSSLPrivateKey(bytes: Array(data), format: .pem) { (setter: NIOSSLPassphraseSetter<[UInt8]>) in
                    setter(Array(passphrase.utf8))
                }
            } else {
                key = try NIOSSLPrivateKey(bytes: Array(data), format: .pem)
            }
        } catch {
            throw CertificateError(
                code: encrypted ? .wrongPassphrase : .noPrivateKey,
                path: path,
                reason: encrypted ? "cannot decrypt the private key: wrong passphrase?" : "cannot read the private key"
            )
        }
        return ClientIdentity(certificateChain: certificates, privateKey: key, path: path)
    }

    private static func loadPKCS12(path: String, passphrase: String?) throws(CertificateError) -> ClientIdentity {
        do {
            let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: Array((passphrase ?? "").utf8))
            return ClientIdentity(certificateChain: bundle.certificateChain, privateKey: bundle.privateKey, path: path)
        } catch {
            throw CertificateError(
                code: .wrongPassphrase,
                path: path,
                reason: "cannot open the PKCS#12 file: wrong passphrase, or not a PKCS#12 file with a certificate and key"
            )
        }
    }
}

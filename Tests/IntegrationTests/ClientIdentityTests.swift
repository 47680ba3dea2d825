import APNsTransport
import Foundation
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// Loading the provider identity in every shape the tutorial's operators have it.
@Suite struct ClientIdentityTests {
    @Test(arguments: ["ck.pem", "ck-legacy.pem", "ck.p12"])
    func encryptedForms(file: String) throws {
        let identity = try ClientIdentity.load(path: TestCertificates.path(file), passphrase: TestCertificates.passphrase)
        #expect(identity.certificateChain.count == 1)
        _ = try GatewayTLS.clientContext(identity: identity, caFile: TestCertificates.path("ca.pem"))
    }

    @Test func unencryptedPEMNeedsNoPassphrase() throws {
        let identity = try ClientIdentity.load(path: TestCertificates.path("ck-unencrypted.pem"), passphrase: nil)
        #expect(identity.certificateChain.count == 1)
    }

    @Test(arguments: ["ck.pem", "ck-legacy.pem", "ck.p12"])
    func wrongPassphraseIsAClearError(file: String) {
        let path = TestCertificates.path(file)
        let error = #expect(throws: CertificateError.self) { try ClientIdentity.load(path: path, passphrase: "not-it-at-all") }
        #expect(error?.code == .wrongPassphrase)
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains("not-it-at-all") == false)
    }

    @Test func encryptedKeyWithoutPassphraseNamesTheSetting() {
        let error = #expect(throws: CertificateError.self) {
            try ClientIdentity.load(path: TestCertificates.path("ck.pem"), passphrase: nil)
        }
        #expect(error?.code == .passphraseRequired)
        #expect(error?.description.contains("PUSHCHAT_APNS_PASSPHRASE") == true)
    }

    @Test func aFileWithoutAKeyIsAClearError() {
        let error = #expect(throws: CertificateError.self) {
            try ClientIdentity.load(path: TestCertificates.path("ca.pem"), passphrase: nil)
        }
        #expect(error?.code == .noPrivateKey)
    }

    @Test func aMissingFileIsAClearError() {
        let error = #expect(throws: CertificateError.self) { try ClientIdentity.load(path: "/nonexistent/ck.pem", passphrase: nil) }
        #expect(error?.code == .unreadableFile)
    }
}

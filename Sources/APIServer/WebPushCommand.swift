import ArgumentParser
import Foundation
import Settings
import Support
import WebPush

/// `pushchat-api webpush generate-key FILE`: the application server's VAPID key for Web Push (issue 46); `webpush
/// public-key FILE`: its public half, for the API's `webpush_public_key`.
struct WebPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush",
        abstract: "Web Push (browsers): make the application server's VAPID key, or print its public half.",
        subcommands: [GenerateKey.self, PublicKey.self]
    )

    struct GenerateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-key",
            abstract:
                "Write a new VAPID key (a P-256 private key in PEM, mode 0600) to FILE and print its public key: the applicationServerKey pages subscribe with. An existing file is never overwritten."
        )
        @Argument(help: "Where to write the key (webpush_vapid_key_file names it).")
        var file: String

        func run() async throws {
            let key = VAPIDKey.generate()
            // O_EXCL: a key that exists is the one browsers subscribed with; replacing it would silence them all.
            let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard descriptor >= 0 else {
                let reason =
                    errno == EEXIST
                    ? "it exists (a new key would orphan every browser subscribed with the old one)" : String(cString: strerror(errno))
                ProcessFailure.printError("pushchat-api webpush generate-key", "cannot write \(file): \(reason)")
                throw ExitCode(1)
            }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            do {
                try handle.write(contentsOf: Data(key.pem.utf8))
                try handle.close()
            } catch {
                ProcessFailure.printError("pushchat-api webpush generate-key", "cannot write \(file): \(error.localizedDescription)")
                throw ExitCode(1)
            }
            print("VAPID key written to \(file); its public key (applicationServerKey):")
            print(key.publicKey)
        }
    }

    struct PublicKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "public-key",
            abstract:
                "Print the public half of the VAPID key in FILE (base64url, the applicationServerKey): what webpush_public_key and apps --vapid-public-key take."
        )
        @Argument(help: "The VAPID key file.")
        var file: String

        func run() async throws {
            do {
                print(try VAPIDKey(file: file).publicKey)
            } catch {
                ProcessFailure.printError("pushchat-api webpush public-key", "\(file): \(error.reason)")
                throw ExitCode(1)
            }
        }
    }
}

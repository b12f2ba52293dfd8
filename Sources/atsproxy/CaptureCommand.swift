import ArgumentParser
import CaptureStore
import Foundation

/// `atsproxy capture copy|prune`: moving captures between a file and the team store, and the store's retention.
struct CaptureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Copy captures between a file and a PostgreSQL team store; prune the store.",
        discussion: "See docs/team-store.md.",
        subcommands: [Copy.self, Prune.self])

    struct Copy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a capture file into the team store (each run a new run there), or a selection of the "
                + "store into a new capture file.",
            discussion: """
                atsproxy capture copy laptop.atscap postgresql://lab@db/atsproxy
                atsproxy capture copy postgresql://lab@db/atsproxy night.atscap --label ci --since 24h
                """)

        @Argument(help: "A capture file or a postgresql:// store.")
        var source: String

        @Argument(help: "A postgresql:// store (from a file), or a new capture file (from a store).")
        var destination: String

        @OptionGroup var filterOptions: CaptureFilterOptions

        @OptionGroup var store: TeamStoreOptions

        func run() throws {
            let from = PostgresLocation(source)
            let to = PostgresLocation(destination)
            switch (from, to) {
            case (nil, let target?):
                guard filterOptions.expression == nil, store.isEmpty else {
                    throw failure(
                        "atsproxy capture copy: error: a capture file is copied whole; --filter, --label, --since and "
                            + "--until select what is copied from a store", status: 2)
                }
                let reader = try openCapture(source, command: "capture copy")
                let progress = TerminalProgress(verb: "copying \(source)")
                do {
                    let runs = try PostgresUpload.copy(
                        from: reader, to: target, version: ATSProxyCommand.configuration.version,
                        progress: progress.update)
                    progress.finish()
                    let count = try reader.count()
                    FileHandle.standardError.write(Data(
                        ("atsproxy capture copy: \(count) exchanges in \(runs.count) runs copied to \(target.redacted) "
                            + "(runs \(runs.map(String.init).joined(separator: ", ")))\n").utf8))
                } catch {
                    progress.finish()
                    throw failure("atsproxy capture copy: error: \(error)", status: 2)
                }
            case (let origin?, nil):
                if FileManager.default.fileExists(atPath: destination) {
                    throw failure(
                        "atsproxy capture copy: error: \(destination) exists; copy into a new file (the store's ids "
                            + "would collide with the file's)", status: 2)
                }
                let filter = try filterOptions.filter(command: "capture copy")
                let progress = TerminalProgress(verb: "copying \(origin.redacted)")
                do {
                    let count = try PostgresSnapshot.copy(
                        from: origin, selection: store.selection(filter: filter), into: destination,
                        progress: progress.update)
                    try PostgresSnapshot.seal(destination)
                    progress.finish()
                    FileHandle.standardError.write(Data(
                        "atsproxy capture copy: \(count) exchanges copied to \(destination)\n".utf8))
                } catch {
                    progress.finish()
                    throw failure("atsproxy capture copy: error: \(error)", status: 2)
                }
            default:
                throw failure(
                    "atsproxy capture copy: error: one side is a capture file and the other a postgresql:// store",
                    status: 2)
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove the team store's runs whose last exchange is older than an age.",
            discussion: "atsproxy capture prune postgresql://lab@db/atsproxy --older-than 30d")

        @Argument(help: "A postgresql:// store.")
        var store: String

        @Option(
            name: .customLong("older-than"),
            help: ArgumentHelp("An age: 30d, 12h, 2w.", valueName: "AGE"))
        var olderThan: String

        func run() throws {
            guard let target = PostgresLocation(store) else {
                throw failure("atsproxy capture prune: error: prune is for a postgresql:// store; a capture file is "
                    + "removed whole", status: 2)
            }
            guard let age = TimeSpec.duration(olderThan) else {
                throw failure("atsproxy capture prune: error: --older-than takes an age such as 30d, 12h or 2w "
                    + "(got \(olderThan))", status: 2)
            }
            let progress = TerminalProgress(verb: "pruning \(target.redacted)", noun: "runs")
            do {
                let result = try PostgresPrune.prune(
                    target, olderThan: Date().timeIntervalSince1970 - age, progress: progress.update)
                progress.finish()
                print("pruned \(result.runs) runs (\(result.exchanges) exchanges) older than \(olderThan) "
                    + "from \(target.redacted)")
            } catch {
                progress.finish()
                throw failure("atsproxy capture prune: error: \(error)", status: 2)
            }
        }
    }
}

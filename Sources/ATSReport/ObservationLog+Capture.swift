import CaptureStore

extension ObservationLog {
    /// Every exchange of the capture `reader` reads (one run of it when `runID` is given), folded.
    public init(reading reader: CaptureReader, runID: Int64? = nil) throws(CaptureFileError) {
        self.init()
        for origin in try reader.observedOrigins(runID: runID) {
            // A group mixes carriages only when the same origin was both reached and not (no handshake either way):
            // split it so an unreachable server is not counted as judged.
            let reached = origin.exchanges - origin.tunnelled - origin.unreachable
            let parts: [(Int, Observation.Carriage)] = [
                (reached, .observed), (origin.tunnelled, .tunnelled), (origin.unreachable, .unreachable),
            ]
            for (count, carriage) in parts where count > 0 {
                add(
                    Observation(
                        url: origin.sampleURL, host: origin.host, handshake: origin.handshake, exchanges: count,
                        carriage: carriage))
            }
        }
    }
}

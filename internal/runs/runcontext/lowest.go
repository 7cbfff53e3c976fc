package runcontext

import (
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/trust"
)

// Lowest is the lowest trust summary of the elements of the finished
// context (its follow-ups included): domain.SummarizeTrust over what
// every element puts in play (domain.InPlayWithFiles: the lower of trust
// and provenance, unverified for an element in withText, which carries a
// file with text). An answer's provenance is decided on it
// (runs.Service.AnswerProvenance).
func (fc *Finished) Lowest(elems []Element, withText map[string]bool) trust.Level {
	levels := make([]domain.Trust, len(elems))
	for i, e := range elems {
		f := fc.Finish(e)
		levels[i] = domain.InPlayWithFiles(f.Trust, f.Provenance, withText[e.ID])
	}
	return domain.SummarizeTrust(levels).Lowest
}

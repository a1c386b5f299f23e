// Package demo makes the traffic of `evtctl demo`: OEP-41-style CloudEvents from a small
// online-learning business — courses created and updated in a catalog, learners enrolling,
// orders purchased — at a steady pace with occasional bursts.
package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
)

// Event types the demo sends.
const (
	TypeCourseCreated = "org.openedx.catalog.course.created.v1"
	TypeCourseUpdated = "org.openedx.catalog.course.updated.v1"
	TypeEnrolled      = "org.openedx.learning.course.enrollment.created.v1"
	TypePurchased     = "org.openedx.ecommerce.order.purchased.v1"
)

// Types lists the event types in the order docs/quick-start.md names them.
var Types = []string{TypeCourseCreated, TypeCourseUpdated, TypeEnrolled, TypePurchased}

const (
	sourceCatalog   = "https://discovery.example.com/events/"
	sourceLMS       = "https://lms.example.com/events/"
	sourceEcommerce = "https://ecommerce.example.com/events/"
)

// Generator makes a plausible sequence of events. It is not safe for concurrent use.
type Generator struct {
	rng     *rand.Rand
	now     func() time.Time
	courses []course
	orders  int
	users   int
}

type course struct {
	Key   string  `json:"course_key"`
	Title string  `json:"title"`
	Org   string  `json:"org"`
	Start string  `json:"start"`
	Price float64 `json:"price"`
}

var (
	orgs     = []string{"DemoX", "HarvardX", "MITx", "EPFLx"}
	subjects = []string{"Distributed Systems", "Linear Algebra", "Event Sourcing", "Go Programming", "Data Ethics", "Cryptography", "Compilers", "Statistics"}
	levels   = []string{"Introduction to", "Advanced", "Applied", "Foundations of"}
	modes    = []string{"audit", "verified", "verified", "professional"}
)

// New returns a generator; the same seed gives the same sequence of choices.
func New(seed uint64, now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: now}
}

// Next returns the next event in the CloudEvents JSON format.
func (g *Generator) Next() []byte {
	// A catalog needs courses before anyone can enroll in or buy one.
	if len(g.courses) < 3 {
		return g.courseCreated()
	}
	switch r := g.rng.IntN(100); {
	case r < 8:
		return g.courseCreated()
	case r < 20:
		return g.courseUpdated()
	case r < 70:
		return g.enrolled()
	default:
		return g.purchased()
	}
}

// Burst returns the events of a sudden wave of activity — a course launch: the course is
// published and n learners enroll in it, some buying a certificate.
func (g *Generator) Burst(n int) [][]byte {
	out := [][]byte{g.courseCreated()}
	c := g.courses[len(g.courses)-1]
	for i := 0; i < n; i++ {
		if g.rng.IntN(4) == 0 {
			out = append(out, g.purchase(c))
		} else {
			out = append(out, g.enroll(c))
		}
	}
	return out
}

func (g *Generator) courseCreated() []byte {
	org := orgs[g.rng.IntN(len(orgs))]
	n := len(g.courses) + 101
	start := g.now().UTC().AddDate(0, 0, 14+g.rng.IntN(60)).Truncate(24 * time.Hour)
	c := course{
		Key:   fmt.Sprintf("course-v1:%s+CS%d+%d_T%d", org, n, start.Year(), (int(start.Month())-1)/3+1),
		Title: levels[g.rng.IntN(len(levels))] + " " + subjects[g.rng.IntN(len(subjects))],
		Org:   org,
		Start: start.Format(time.RFC3339),
		Price: float64(49 + 50*g.rng.IntN(4)),
	}
	g.courses = append(g.courses, c)
	return g.event(TypeCourseCreated, sourceCatalog, c.Key, false, c)
}

func (g *Generator) courseUpdated() []byte {
	c := &g.courses[g.rng.IntN(len(g.courses))]
	var changed string
	if g.rng.IntN(2) == 0 {
		start, _ := time.Parse(time.RFC3339, c.Start)
		c.Start = start.AddDate(0, 0, 7).Format(time.RFC3339)
		changed = "start"
	} else {
		c.Price += 10
		changed = "price"
	}
	return g.event(TypeCourseUpdated, sourceCatalog, c.Key, false, struct {
		course
		Changed []string `json:"changed_fields"`
	}{*c, []string{changed}})
}

func (g *Generator) enrolled() []byte {
	return g.enroll(g.courses[g.rng.IntN(len(g.courses))])
}

func (g *Generator) enroll(c course) []byte {
	g.users++
	return g.event(TypeEnrolled, sourceLMS, c.Key, true, struct {
		User      userRef `json:"user"`
		CourseKey string  `json:"course_key"`
		Mode      string  `json:"mode"`
		IsActive  bool    `json:"is_active"`
	}{g.user(), c.Key, modes[g.rng.IntN(len(modes))], true})
}

func (g *Generator) purchased() []byte {
	return g.purchase(g.courses[g.rng.IntN(len(g.courses))])
}

func (g *Generator) purchase(c course) []byte {
	g.orders++
	number := fmt.Sprintf("EDX-%06d", 100000+g.orders)
	return g.event(TypePurchased, sourceEcommerce, "order/"+number, true, struct {
		OrderNumber string     `json:"order_number"`
		User        userRef    `json:"user"`
		Lines       []lineItem `json:"lines"`
		Total       float64    `json:"total"`
		Currency    string     `json:"currency"`
	}{number, g.user(), []lineItem{{SKU: fmt.Sprintf("SKU-%X", g.rng.Uint32()&0xfffff), CourseKey: c.Key, Price: c.Price}}, c.Price, "USD"})
}

type userRef struct {
	ID       int    `json:"id"`
	Username string `json:"username"`
}

type lineItem struct {
	SKU       string  `json:"sku"`
	CourseKey string  `json:"course_key"`
	Price     float64 `json:"price"`
}

func (g *Generator) user() userRef {
	id := 1000 + g.rng.IntN(9000)
	return userRef{ID: id, Username: fmt.Sprintf("learner%d", id)}
}

// envelope is a CloudEvent in the JSON format with the OEP-41 extensions.
type envelope struct {
	SpecVersion     string `json:"specversion"`
	Type            string `json:"type"`
	Source          string `json:"source"`
	ID              string `json:"id"`
	Time            string `json:"time"`
	Subject         string `json:"subject"`
	DataContentType string `json:"datacontenttype"`
	MinorVersion    int    `json:"minorversion"`
	PII             bool   `json:"pii"`
	Data            any    `json:"data"`
}

func (g *Generator) event(typ, source, subject string, pii bool, data any) []byte {
	id, err := uuid.NewUUID() // version 1, as OEP-41 asks
	if err != nil {
		id = uuid.New()
	}
	b, err := json.Marshal(envelope{
		SpecVersion: "1.0", Type: typ, Source: source, ID: id.String(),
		Time: g.now().UTC().Format(time.RFC3339Nano), Subject: subject,
		DataContentType: "application/json", PII: pii, Data: data,
	})
	if err != nil {
		panic(err) // the values above always marshal
	}
	return b
}

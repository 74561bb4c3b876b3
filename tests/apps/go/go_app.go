// go_app.go: the legacy coupon flow with Go's database/sql and go-sql-driver/mysql, as its users write it:
// one *sql.DB (default pool) per app instance, db.QueryRow and db.Exec without a transaction, so each
// statement borrows any idle connection. Variant database_sql: the driver's default (arguments go as
// server-side prepared statements); interpolate: interpolateParams=true (text protocol, client-side literals).
// Built with GO111MODULE=off GOPATH=/usr/share/gocode (Debian's golang-github-go-sql-driver-mysql-dev).
package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

const maxDistinctErrors = 50

type errorKey struct {
	statement string
	code      int
	message   string
}

type report struct {
	App             string        `json:"app"`
	Variant         string        `json:"variant"`
	AttemptsPlanned int           `json:"attempts_planned"`
	Attempts        int           `json:"attempts"`
	Claimed         int           `json:"claimed"`
	SoldOutApp      int           `json:"sold_out_app"`
	Conflicts       int           `json:"conflicts"`
	ClaimedUsers    []int64       `json:"claimed_users"`
	Errors          []errorReport `json:"errors"`
	SetupErrors     []string      `json:"setup_errors"`
	ElapsedS        float64       `json:"elapsed_s"`
}

type errorReport struct {
	Statement string `json:"statement"`
	Code      int    `json:"code"`
	Message   string `json:"message"`
	Count     int    `json:"count"`
}

var digits = regexp.MustCompile(`[0-9]+`)

func claim(db *sql.DB, campaign, user int64, statement *string) (string, error) {
	*statement = "SELECT"
	var remain int64
	if err := db.QueryRow("SELECT remain FROM coupon_stock WHERE campaign_id = ?", campaign).Scan(&remain); err != nil {
		return "", err
	}
	if remain <= 0 {
		return "sold_out_app", nil
	}
	*statement = "UPDATE"
	if _, err := db.Exec("UPDATE coupon_stock SET remain = ? WHERE campaign_id = ?", remain-1, campaign); err != nil {
		return "", err
	}
	*statement = "INSERT"
	if _, err := db.Exec("INSERT INTO coupon_order (user_id, campaign_id, created_at) VALUES (?, ?, NOW())",
		user, campaign); err != nil {
		return "", err
	}
	return "claimed", nil
}

func main() {
	host := flag.String("host", "127.0.0.1", "")
	ports := flag.String("ports", "", "comma-separated: one app instance (pod) per port")
	user := flag.String("user", "", "")
	password := flag.String("password", "", "")
	database := flag.String("database", "", "")
	campaign := flag.Int64("campaign", 1, "")
	threads := flag.Int("threads", 24, "")
	users := flag.Int("users", 300, "")
	firstUser := flag.Int64("first-user", 1, "")
	attempts := flag.Int("attempts", 3, "")
	seed := flag.Int64("seed", 1, "")
	variant := flag.String("variant", "database_sql", "database_sql|interpolate")
	flag.Parse()
	if *variant != "database_sql" && *variant != "interpolate" {
		fmt.Fprintln(os.Stderr, "go_app: --variant database_sql|interpolate")
		os.Exit(2)
	}

	var pods []*sql.DB
	for _, p := range strings.Split(*ports, ",") {
		port, err := strconv.Atoi(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "go_app: bad --ports")
			os.Exit(2)
		}
		dsn := fmt.Sprintf("%s:%s@tcp(%s:%d)/%s?interpolateParams=%t", *user, *password, *host, port, *database,
			*variant == "interpolate")
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			fmt.Fprintln(os.Stderr, "go_app:", err)
			os.Exit(1)
		}
		pods = append(pods, db)
	}

	var plan []int64
	for u := *firstUser; u < *firstUser+int64(*users); u++ {
		for a := 0; a < *attempts; a++ {
			plan = append(plan, u)
		}
	}
	rand.New(rand.NewSource(*seed)).Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })

	var mu sync.Mutex
	next := 0
	out := report{App: "go", Variant: *variant, AttemptsPlanned: len(plan), ClaimedUsers: []int64{},
		Errors: []errorReport{}, SetupErrors: []string{}}
	errs := map[errorKey]int{}
	began := time.Now()
	var wg sync.WaitGroup
	for t := 0; t < *threads; t++ {
		wg.Add(1)
		go func(db *sql.DB) {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(plan) {
					return
				}
				statement := ""
				kind, err := claim(db, *campaign, plan[i], &statement)
				mu.Lock()
				out.Attempts++
				switch {
				case err != nil:
					key := errorKey{statement, 0, err.Error()}
					var me *mysql.MySQLError
					if errors.As(err, &me) {
						key = errorKey{statement, int(me.Number), me.Message}
					}
					key.message = digits.ReplaceAllString(key.message, "N")
					if _, seen := errs[key]; !seen && len(errs) >= maxDistinctErrors {
						key.message = "(other messages)"
					}
					errs[key]++
				case kind == "claimed":
					out.Claimed++
					out.ClaimedUsers = append(out.ClaimedUsers, plan[i])
				case kind == "sold_out_app":
					out.SoldOutApp++
				}
				mu.Unlock()
			}
		}(pods[t%len(pods)])
	}
	wg.Wait()
	out.ElapsedS = time.Since(began).Seconds()
	for _, db := range pods {
		db.Close()
	}
	sort.Slice(out.ClaimedUsers, func(i, j int) bool { return out.ClaimedUsers[i] < out.ClaimedUsers[j] })
	for k, n := range errs {
		out.Errors = append(out.Errors, errorReport{k.statement, k.code, k.message, n})
	}
	sort.Slice(out.Errors, func(i, j int) bool { return out.Errors[i].Count > out.Errors[j].Count })
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
